package compact_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
)

// BenchmarkActor measures one compaction pass at the moment the size rule
// fires: a session that starts with a snapshot of a database of the given
// size (4 KiB pages, one random 3,000-byte row per page: little for the
// compressor to gain) followed by a log that rewrote 1.4 times as many rows,
// so the log weighs about the database. The pass reads the snapshot and the
// whole log, rebuilds the database, writes and uploads a new snapshot.
// Covered objects are kept (a long retention) and the new snapshot removed
// between iterations, so every iteration does the same work; the deletes
// themselves (two DeleteMany calls) are not measured.
//
// Reported per pass: MB/s over the database size, bytes read and written,
// and the largest Go heap in use seen during the pass (sampled every 10 ms),
// which stays flat as the database grows.
//
//	go test ./compact -run '^$' -bench Actor -benchtime 3x
//	scripts/with-s3.sh go test ./compact -run '^$' -bench Actor -benchtime 3x
func BenchmarkActor(b *testing.B) {
	for _, size := range []int{8 << 20, 100 << 20} {
		for _, be := range buckettest.Backends() {
			b.Run(fmt.Sprintf("size=%dMiB/%s", size>>20, be.Name), func(b *testing.B) { benchActor(b, be.New(b), size) })
		}
	}
}

func benchActor(b *testing.B, bk bucket.Bucket, size int) {
	// Session 1 builds the database; session 2 starts with a snapshot of
	// it and rewrites every row. Only session 2 is measured.
	d, rows := benchSession(b, bk, size)
	a := d.actor
	// Each page is three quarters random bytes and compresses to about
	// that: rewriting every row and then 40% of them again makes the log
	// (compressed) about the size of the database (not).
	for _, upTo := range []int{rows, rows * 4 / 10} {
		for n := 0; n < upTo; n += perTx {
			d.exec(fmt.Sprintf("UPDATE t SET b=randomblob(%d) WHERE id > %d AND id <= %d", rowBytes, n, min(n+perTx, upTo)))
			d.durable() // one batch each: a batch merges what its commits rewrite
		}
	}
	d.durable()
	d.close()
	old := append(buckettest.Keys(b, bk, a.SnapshotSessionPrefix(1)), buckettest.Keys(b, bk, a.LogSessionPrefix(1))...)
	if err := bk.DeleteMany(b.Context(), old); err != nil {
		b.Fatal(err)
	}

	opts := testOptions(b)
	opts.Retention = 1000 * time.Hour
	opts.Force = true // the log is about the database's size, either side of it
	var res compact.Result
	var peak uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stopSampling := sampleHeap(&peak)
		var err error
		res, err = compact.Actor(b.Context(), bk, a, opts)
		stopSampling()
		if err != nil {
			b.Fatal(err)
		}
		if res.Snapshot == "" {
			b.Fatalf("no snapshot written: log %d bytes, database %d", res.RuleLogBytes, res.RuleDBBytes)
		}
		b.StopTimer()
		if err := bk.Delete(b.Context(), res.Snapshot); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.SetBytes(res.RuleDBBytes)
	b.ReportMetric(float64(res.RuleDBBytes)/1e6, "dbMB")
	b.ReportMetric(float64(res.RuleLogBytes)/1e6, "logMB")
	b.ReportMetric(float64(res.BytesRead)/1e6, "readMB")
	b.ReportMetric(float64(res.BytesWritten)/1e6, "writtenMB")
	b.ReportMetric(float64(peak)/(1<<20), "peakHeapMiB")
}

// sampleHeap records the largest HeapInuse seen until the returned
// function is called.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// BenchmarkIncremental measures a pass over a large database of which
// little changed since its snapshot, a manifest: 256 MiB (4 KiB pages,
// one random 3,000-byte row per page, 1,024 chunks of 256 KiB) with 1 MiB
// of pages rewritten, either contiguous (a few chunks touched) or spread
// evenly over the database (every fourth chunk touched). path=full loads
// the base manifest whole, as passes did before they loaded chunks on
// first touch (compact.FullReplay); path=incremental is the default.
// Both build the same manifest (TestIncrementalMatchesFullReplay).
//
// Reported per pass: time, the bytes read (readMB: the manifest, the
// chunks fetched and the log), the chunk objects read (chunkGETs), and
// the bytes written.
//
//	go test ./compact -run '^$' -bench Incremental -benchtime 3x
//	scripts/with-s3.sh go test ./compact -run '^$' -bench Incremental -benchtime 3x
func BenchmarkIncremental(b *testing.B) {
	const size, changed = 256 << 20, 1 << 20
	for _, be := range buckettest.Backends() {
		b.Run(fmt.Sprintf("size=%dMiB/changed=%dMiB/%s", size>>20, changed>>20, be.Name), func(b *testing.B) {
			benchIncremental(b, be.New(b), size, changed)
		})
	}
}

func benchIncremental(b *testing.B, bk bucket.Bucket, size, changed int) {
	d, rows := benchSession(b, bk, size) // session 2's first snapshot is a manifest of every chunk
	a := d.actor
	g := &getCounter{Bucket: bk, prefix: a.ChunkPrefix()}
	pages := changed / 4096
	for _, shape := range []struct {
		name  string
		where string
	}{
		{"contiguous", fmt.Sprintf("id > %d AND id <= %d", rows/2, rows/2+pages)},
		{"spread", fmt.Sprintf("id %% %d = 0", rows/pages)},
	} {
		d.exec(fmt.Sprintf("UPDATE t SET b = randomblob(%d) WHERE %s", rowBytes, shape.where))
		d.durable()
		for _, path := range []string{"full", "incremental"} {
			b.Run(shape.name+"/path="+path, func(b *testing.B) {
				opts := testOptions(b)
				opts.Retention = 1000 * time.Hour
				opts.Force = true
				if path == "full" {
					opts = compact.FullReplay(opts)
				}
				var res compact.Result
				var gets int
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var err error
					res, err = compact.Actor(b.Context(), g, a, opts)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					gets = len(g.take())
					if err := bk.Delete(b.Context(), res.Snapshot); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(res.RuleDBBytes)/1e6, "dbMB")
				b.ReportMetric(float64(res.BytesRead)/1e6, "readMB")
				b.ReportMetric(float64(gets), "chunkGETs")
				b.ReportMetric(float64(res.BytesWritten)/1e6, "writtenMB")
			})
		}
		// The next shape's log starts from a snapshot of this one's state.
		opts := testOptions(b)
		opts.Force = true
		if _, err := compact.Actor(b.Context(), bk, a, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// Rows of a bench database: rowBytes random bytes each, one to a 4 KiB
// page, perTx to a transaction.
const rowBytes, perTx = 3000, 1000

// benchSession writes about size bytes of rows in session 1 and opens
// session 2 on them, returning it and the number of rows.
func benchSession(b *testing.B, bk bucket.Bucket, size int) (*testDB, int) {
	rows := size / 4096
	dir, id := b.TempDir(), newActorID()
	d := openDBPage(b, bk, dir, id, 1, 4096)
	d.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
	for n := 0; n < rows; n += perTx {
		d.exec(fmt.Sprintf("INSERT INTO t(b) SELECT randomblob(%d) FROM generate_series(1, %d)", rowBytes, min(perTx, rows-n)))
	}
	d.durable()
	d.close()
	return openDBPage(b, bk, dir, id, 2, 4096), rows
}
