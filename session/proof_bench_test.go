package session

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
)

// envAckBenchSeconds sets how long each run of BenchmarkAckRequests
// commits (default 10 s: 1,000 commits at 100 a second).
const envAckBenchSeconds = "FRAMECTL_BENCH_ACK_SECONDS"

// BenchmarkAckRequests counts the requests a claimed session makes per
// 1,000 commits at 100 commits a second, at the defaults (the bucket's
// upload interval, background compaction, a node with the default lease),
// with Durable after each commit and without (async), with the proof of
// ownership (proof.go) and without it, as before it existed: the rest of
// the path is the same code. Reported per 1,000 commits: all requests,
// then PUTs of the log, GETs of own.json (the proofs), and the node's
// lease requests, which depend on time, not commits.
//
//	go test ./session -run '^$' -bench AckRequests -benchtime 1x
func BenchmarkAckRequests(b *testing.B) {
	seconds := 10
	if v := os.Getenv(envAckBenchSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number of seconds", envAckBenchSeconds, v)
		}
		seconds = n
	}
	buckets := []struct {
		name     string
		new      func(testing.TB) bucket.Bucket
		interval time.Duration // the default for the bucket, which Counting hides
	}{{"dir", buckettest.Dir, DefaultDirUploadInterval}, {"s3", buckettest.S3, DefaultS3UploadInterval}}
	for _, bk := range buckets {
		for _, each := range []bool{true, false} {
			for _, proof := range []bool{false, true} {
				mode := map[bool]string{true: "durable-each", false: "async"}[each]
				when := map[bool]string{true: "after", false: "before"}[proof]
				b.Run(fmt.Sprintf("bucket=%s/%s/%s", bk.name, mode, when), func(b *testing.B) {
					for range b.N {
						benchAckRequests(b, bk.new(b), bk.interval, time.Duration(seconds)*time.Second, each, proof)
					}
				})
			}
		}
	}
}

func benchAckRequests(b *testing.B, shared bucket.Bucket, interval, d time.Duration, each, proof bool) {
	ctx := context.Background()
	counting := buckettest.NewCounting(shared)
	node, err := fence.Register(ctx, counting, "127.0.0.1:7001", fence.Options{})
	require.NoError(b, err)
	defer node.Close(ctx)
	cfg := replTestConfig(b, counting)
	cfg.Epoch, cfg.Node, cfg.DisableCompaction, cfg.RetryMin, cfg.RetryMax = 0, node, false, 0, 0
	cfg.UploadInterval = interval
	db, err := openDB(ctx, cfg)
	require.NoError(b, err)
	if !proof {
		db.rep.proof.confirm = nil // as before proofs existed
	}
	c := replConn(b, db)
	require.NoError(b, c.Exec("CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t VALUES(1, 0)"))
	require.NoError(b, db.Durable(ctx))
	before := counting.Counts()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	commits := 0
	b.ResetTimer()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		require.NoError(b, c.Exec("UPDATE t SET n = n + 1 WHERE id = 1"))
		commits++
		if each {
			require.NoError(b, db.Durable(ctx))
		}
	}
	require.NoError(b, db.Durable(ctx))
	b.StopTimer()
	got := counting.Counts().Since(before)
	per := func(n int64) float64 { return 1000 * float64(n) / float64(commits) }
	b.ReportMetric(per(got.Total()), "req/1k")
	b.ReportMetric(per(got.Get("put", "log")), "put-log/1k")
	b.ReportMetric(per(got.Get("get", "own")), "get-own/1k")
	b.ReportMetric(per(got.Get("put", "node")+got.Get("get", "node")+got.Get("list", "node")), "node/1k")
	b.ReportMetric(float64(commits), "commits")
	require.NoError(b, c.Close())
	require.NoError(b, db.Close(ctx))
}
