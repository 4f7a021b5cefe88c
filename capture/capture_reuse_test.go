package capture

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/require"
)

// TestCapturePageReuse: after warm-up, a run of small commits through real
// SQLite takes its page buffers from the pool the sink releases into, not
// from the allocator. Measured two ways: the pool's own count of buffers it
// had to allocate, and the bytes the process allocated (64 KiB pages, so a
// buffer per commit would stand out).
func TestCapturePageReuse(t *testing.T) {
	const pageSize, warm, n = 65536, 50, 400
	dir := t.TempDir()
	path := filepath.Join(dir, "db.sqlite")
	capPrepare(t, path, pageSize, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INT); INSERT INTO t VALUES(1, 0)")
	v, name := capRegister(t)
	s := &capCountSink{}
	capAttach(t, v, path, s)
	c := capOpen(t, name, path)
	dbtest.Exec(t, c, "PRAGMA synchronous=NORMAL")
	stmt, _, err := c.Prepare("UPDATE t SET v=v+1 WHERE id=1")
	require.NoError(t, err)
	defer stmt.Close()
	update := func() {
		require.NoError(t, stmt.Exec())
	}
	for range warm {
		update()
	}
	made := v.state(path).pool.Made

	made0, commits0 := made(), s.n.Load()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range n {
		update()
	}
	runtime.ReadMemStats(&m1)
	newBuffers, commits := made()-made0, s.n.Load()-commits0
	allocated := m1.TotalAlloc - m0.TotalAlloc

	if commits != n {
		t.Fatalf("%d commits captured, want %d", commits, n)
	}
	if newBuffers > n/20 {
		t.Errorf("the pool allocated %d page buffers for %d commits", newBuffers, n)
	}
	if allocated > n*pageSize/8 {
		t.Errorf("%d bytes allocated over %d commits of one %d-byte page (%d per commit)", allocated, n, pageSize, allocated/n)
	}
	t.Logf("%d commits: %d new page buffers, %d bytes and %d objects allocated in the process (%.1f objects per commit, all of go-sqlite3 included)",
		n, newBuffers, allocated, m1.Mallocs-m0.Mallocs, float64(m1.Mallocs-m0.Mallocs)/n)
}
