package session

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
)

// envOpenBenchMiB sets BenchmarkOpenCurrent's database size in MiB
// (default 256; 1024 for the figure quoted in BENCHMARKS.md).
const envOpenBenchMiB = "FRAMECTL_BENCH_OPEN_MIB"

// BenchmarkOpenCurrent measures a wake: Open of an actor whose local copy
// is current (the previous session closed cleanly in this directory), on
// a database of incompressible rows, after changed MiB of its pages were
// rewritten in the previous session (0: no write since its start). It
// reports the bytes and PUTs the session start uploads, and, for scale,
// how long reading the database file once takes (it is in the page
// cache, as it is on a wake).
//
//	go test ./session -run '^$' -bench OpenCurrent -benchtime 3x
//	FRAMECTL_BENCH_OPEN_MIB=1024 go test ./session -run '^$' -bench OpenCurrent -benchtime 3x
func BenchmarkOpenCurrent(b *testing.B) {
	mib := 256
	if v := os.Getenv(envOpenBenchMiB); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number of MiB", envOpenBenchMiB, v)
		}
		mib = n
	}
	for _, changed := range []int{0, 4} {
		b.Run(fmt.Sprintf("size=%dMiB/changed=%dMiB", mib, changed), func(b *testing.B) {
			benchOpenCurrent(b, mib, changed)
		})
	}
}

func benchOpenCurrent(b *testing.B, mib, changed int) {
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, databaseFile)
	// ~1 KiB rows: four to a 4 KiB page.
	rows := mib << 10
	fillDatabase(b, path, rows)
	size := fileSize(b, path)
	b.SetBytes(size)

	cb := &countingBucket{Bucket: buckettest.Dir(b)}
	cfg := Config{Bucket: cb, Namespace: "bench", Actor: []byte("wake"), Epoch: 1, Dir: dir, DisableCompaction: true}
	db, err := openDB(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	actor := frames.Actor{Namespace: frames.NamespaceID("", "bench"), Actor: frames.ActorKey(cfg.Actor)}
	rng := rand.New(rand.NewPCG(uint64(mib), uint64(changed)))

	var read, open time.Duration
	var uploaded, puts int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if changed > 0 {
			// changed MiB of contiguous rows rewritten through the VFS.
			n := changed << 10
			first := 1 + rng.IntN(rows-n)
			c, err := db.Conn()
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Exec(fmt.Sprintf("UPDATE t SET v = randomblob(1000) WHERE id BETWEEN %d AND %d", first, first+n-1)); err != nil {
				b.Fatal(err)
			}
			c.Close()
			if err := db.Durable(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Close(ctx); err != nil {
			b.Fatal(err)
		}
		// The superseded sessions' objects go, as the tier pass would do
		// it: the bucket holds one session's worth at each wake.
		if _, err := compact.Actor(ctx, cb, actor, compact.Options{ScratchDir: b.TempDir()}); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := readOnce(path); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t0)
		cb.reset()
		cfg.Epoch++
		b.StartTimer()

		t0 = time.Now()
		db, err = openDB(ctx, cfg)
		open += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if s := db.Stats().Start.From; s != StartReused {
			b.Fatalf("wake %d started %s, want the local copy reused", i, s)
		}
		uploaded += cb.bytes.Load()
		puts += cb.puts.Load()
		b.StartTimer()
	}
	b.StopTimer()
	if err := db.Close(ctx); err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(float64(uploaded)/n/(1<<20), "uploaded-MiB/op")
	b.ReportMetric(float64(puts)/n, "puts/op")
	b.ReportMetric(float64(read.Milliseconds())/n, "read-file-ms/op")
	b.ReportMetric(open.Seconds()/read.Seconds(), "open/read")
}

// fillDatabase writes rows rows of 1,000 random bytes to a new database
// at path through the plain "os" VFS: the local copy a first Open starts
// from.
func fillDatabase(b *testing.B, path string, rows int) {
	b.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, sql := range []string{
		"PRAGMA page_size=4096",
		"PRAGMA journal_mode=WAL",
		"CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)",
	} {
		if err := c.Exec(sql); err != nil {
			b.Fatal(err)
		}
	}
	const per = 1 << 14
	for done := 0; done < rows; done += per {
		n := min(per, rows-done)
		if err := c.Exec(fmt.Sprintf("INSERT INTO t(v) SELECT randomblob(1000) FROM generate_series(1, %d)", n)); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// readOnce reads a file to its end.
func readOnce(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// countingBucket counts the PUTs through it and the bytes they carried,
// and the GETs of the actor's batches, snapshots and chunks.
type countingBucket struct {
	bucket.Bucket
	puts       atomic.Int64
	bytes      atomic.Int64
	objectGets atomic.Int64
}

func (c *countingBucket) reset() {
	c.puts.Store(0)
	c.bytes.Store(0)
	c.objectGets.Store(0)
}

func (c *countingBucket) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if k, err := frames.ParseKey(key); err == nil && (k.Kind == frames.KeyLog || k.Kind == frames.KeySnapshot || k.Kind == frames.KeyChunk) {
		c.objectGets.Add(1)
	}
	return c.Bucket.Get(ctx, key)
}

func (c *countingBucket) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	c.puts.Add(1)
	info, err := c.Bucket.Put(ctx, key, iocount.NewReader(body, &c.bytes), size, cond)
	return info, err
}
