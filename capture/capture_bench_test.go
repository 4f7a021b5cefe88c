package capture

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/framectl/framectl/internal/dbtest"
	"github.com/ncruces/go-sqlite3"
)

// BenchmarkCaptureOverhead measures what capture costs a stream of
// single-row UPDATE transactions: the plain "os" VFS against the capture
// VFS with a sink that only releases commits, side by side in one run, at
// synchronous NORMAL (no sync per commit, so the capture's CPU cost shows
// most) and FULL. "vfs=paired" alternates the two databases commit by
// commit, so machine drift hits both alike, and reports the overhead.
func BenchmarkCaptureOverhead(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		for _, kind := range []string{"os", "capture"} {
			b.Run(fmt.Sprintf("vfs=%s/sync=%s", kind, sync), func(b *testing.B) {
				stmt := capBenchDB(b, kind, sync)
				b.ReportAllocs()
				for b.Loop() {
					if err := stmt.Exec(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
		b.Run(fmt.Sprintf("vfs=paired/sync=%s", sync), func(b *testing.B) {
			stmts := [2]*sqlite3.Stmt{capBenchDB(b, "os", sync), capBenchDB(b, "capture", sync)}
			var spent [2]time.Duration
			n := 0
			for b.Loop() {
				for k := range 2 {
					i := (n + k) % 2 // alternate which goes first
					t0 := time.Now()
					if err := stmts[i].Exec(); err != nil {
						b.Fatal(err)
					}
					spent[i] += time.Since(t0)
				}
				n++
			}
			osRate := float64(n) / spent[0].Seconds()
			capRate := float64(n) / spent[1].Seconds()
			b.ReportMetric(osRate, "os-commits/s")
			b.ReportMetric(capRate, "capture-commits/s")
			b.ReportMetric(100*(1-capRate/osRate), "overhead-%")
		})
	}
}

// capBenchDB prepares a one-row table and returns its UPDATE statement,
// through the os VFS or through a capture VFS with a releasing sink.
func capBenchDB(b *testing.B, kind, sync string) *sqlite3.Stmt {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	capPrepare(b, path, 4096, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INT); INSERT INTO t VALUES(1, 0)")
	vfsName := "os"
	if kind == "capture" {
		v, name := capRegister(b)
		capAttach(b, v, path, &capCountSink{})
		vfsName = name
	}
	c := capOpen(b, vfsName, path)
	dbtest.Exec(b, c, "PRAGMA synchronous="+sync)
	stmt, _, err := c.Prepare("UPDATE t SET v=v+1 WHERE id=1")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stmt.Close() })
	return stmt
}
