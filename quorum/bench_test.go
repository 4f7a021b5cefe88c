package quorum_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/session"
)

// BenchmarkDurable measures a write followed by Durable, acknowledged by
// followers (three in-process nodes on 127.0.0.1, quorum two, uploads
// every 10 s: session.DefaultPeerUploadInterval) against the bucket alone (vfs's default pacing, Durable
// uploading at once), side by side in one run, with 1 and 16 writers:
// latency p50/p99 of Durable, commits/s, and PUTs per 1,000 commits
// (batches only; the session's first snapshot is left out).
//
//	scripts/with-s3.sh go test ./quorum -run '^$' -bench '^BenchmarkDurable$' -benchtime 2000x
//
// (anchored: -bench Durable would run BenchmarkDurableAtRate too).
func BenchmarkDurable(b *testing.B) {
	for _, be := range buckettest.Backends() {
		for _, writers := range []int{1, 16} {
			for _, mode := range []string{"peers", "bucket"} {
				b.Run(fmt.Sprintf("bucket=%s/writers=%d/ack=%s", be.Name, writers, mode), func(b *testing.B) {
					benchDurable(b, be.New(b), writers, mode == "peers")
				})
			}
		}
	}
}

// BenchmarkDurableAtRate is BenchmarkDurable's one writer at 100 commits
// a second, for PUTs per 1,000 commits over several upload intervals
// (-benchtime 3000x: 30 s each).
//
//	scripts/with-s3.sh go test ./quorum -run '^$' -bench '^BenchmarkDurableAtRate$' -benchtime 3000x
func BenchmarkDurableAtRate(b *testing.B) {
	for _, be := range buckettest.Backends() {
		for _, mode := range []string{"peers", "bucket"} {
			b.Run(fmt.Sprintf("bucket=%s/ack=%s", be.Name, mode), func(b *testing.B) {
				benchDurableAt(b, be.New(b), 1, mode == "peers", 10*time.Millisecond)
			})
		}
	}
}

func benchDurable(b *testing.B, bk bucket.Bucket, writers int, peers bool) {
	benchDurableAt(b, bk, writers, peers, 0)
}

// benchDurableAt runs b.N commits on writers connections, each writer
// starting a commit every every (0: at once).
func benchDurableAt(b *testing.B, bk bucket.Bucket, writers int, peers bool, every time.Duration) {
	ctx := context.Background()
	var db *framectl.DB
	if peers {
		key := clusterKey(b)
		ns := []*node{startNode(b, bk, key), startNode(b, bk, key), startNode(b, bk, key), startNode(b, bk, key)}
		db, _ = openPaced(b, ns[0], bk, b.TempDir(), 0)
	} else {
		fn, err := fence.Register(ctx, bk, "127.0.0.1:1", testLease)
		require.NoError(b, err)
		b.Cleanup(func() { fn.Close(context.Background()) })
		db, err = framectl.Open(ctx, session.Config{Bucket: bk, Namespace: "q", Actor: []byte("counter"), Dir: b.TempDir(), Node: fn})
		require.NoError(b, err)
	}
	c, err := db.Conn()
	require.NoError(b, err)
	require.NoError(b, c.Exec("CREATE TABLE t(i INTEGER)"))
	require.NoError(b, c.Close())
	require.NoError(b, db.Durable(ctx))
	st0 := db.Stats()
	per := max(1, b.N/writers)
	lat := make([][]time.Duration, writers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := db.Conn()
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			tick := time.Now()
			for i := range per {
				if every > 0 {
					tick = tick.Add(every)
					time.Sleep(time.Until(tick))
				}
				if err := c.Exec(fmt.Sprintf("INSERT INTO t(i) VALUES (%d)", w*per+i)); err != nil {
					b.Error(err)
					return
				}
				t0 := time.Now()
				if err := db.Durable(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	st := db.Stats()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("no commit")
	}
	commits := float64(len(all))
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(commits/took.Seconds(), "commits/s")
	b.ReportMetric(float64(st.PUTs-st0.PUTs)*1000/commits, "PUTs/1000")
	b.ReportMetric(float64(st.BytesUploaded-st0.BytesUploaded)/commits, "bytes-up/commit")
	require.NoError(b, db.Close(ctx))
}
