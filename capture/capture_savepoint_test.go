package capture

import (
	"bytes"
	"maps"
	"testing"

	"github.com/framectl/framectl/internal/dbtest"
	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// ROLLBACK TO a savepoint whose frames spilled into the WAL: SQLite rewinds
// its WAL write position (wal.c sqlite3WalSavepointUndo) and the rest of
// the transaction writes over frames the capture already saw.
func TestCaptureSavepointRollbackSpilled(t *testing.T) {
	_, vfsName, s, path := capSetup(t)
	c := capOpen(t, vfsName, path)
	dbtest.Exec(t, c, "PRAGMA cache_size=10; CREATE TABLE x(v)")
	dbtest.Exec(t, c, "BEGIN")
	for range 300 {
		dbtest.Exec(t, c, "INSERT INTO x VALUES(randomblob(100))")
	}
	dbtest.Exec(t, c, "SAVEPOINT b")
	for range 2000 {
		dbtest.Exec(t, c, "INSERT INTO x VALUES(randomblob(100))")
	}
	dbtest.Exec(t, c, "ROLLBACK TO b; INSERT INTO x VALUES(2); COMMIT")
	require.NoError(t, s.brokenErr(), "capture broke")
	dbtest.Exec(t, c, "INSERT INTO x VALUES(3)")
	_, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(t, err)
	capCompareFiles(t, "after the savepoint rollback", dbtest.FileBytes(t, path), s.replicaBytes(t))
	s.check(t)
	if n := dbtest.Query1(t, c, "SELECT count(*) FROM x"); n != "302" {
		t.Errorf("%s rows, want 302", n)
	}
}

// The rewind at the level of WAL writes: frames past the savepoint are
// rolled back, and a page overwritten in place in them is not emitted
// either.
func TestCaptureWALSavepointRewind(t *testing.T) {
	s := &capListSink{}
	cw := newCapWAL(t, s)
	w := cw.handle(false)
	capMust(t, cw.header(w, 0x1000, 0xabc))
	capMust(t, cw.frame(w, 1, 1, 9, 'a')) // first commit
	// A transaction spills pages 2..5 into frames 2..5; the savepoint
	// began after frame 3.
	for i := uint32(2); i <= 5; i++ {
		capMust(t, cw.frame(w, i, i, 0, 'r'))
	}
	// Page 4 rewritten in place (page only), then ROLLBACK TO: mxFrame
	// goes back to 3 and the next frame header lands at 4.
	_, err := w.WriteAt(bytes.Repeat([]byte{'R'}, capPS), cw.off(4)+walFrameHeaderSize)
	capMust(t, err)
	capMust(t, cw.frame(w, 4, 6, 0, 'n'))
	capMust(t, cw.frame(w, 5, 2, 9, 'c')) // commit frame, page 2 again
	if len(s.broke) != 0 || len(s.commits) != 2 {
		t.Fatalf("%d commits, broken %v", len(s.commits), s.broke)
	}
	if g := s.commits[1]; !maps.Equal(g.pages, map[uint32]byte{2: 'c', 3: 'r', 6: 'n'}) {
		t.Errorf("commit after the rewind: %v, want pages 2, 3 and 6 only", g.pages)
	}
	cw.st.mu.Lock()
	rewinds := cw.st.rewinds
	cw.st.mu.Unlock()
	if w.overwrote != 0 || rewinds != 1 {
		t.Errorf("overwrote=%d rewinds=%d: the in-place overwrite was rolled back with its frame", w.overwrote, rewinds)
	}
}
