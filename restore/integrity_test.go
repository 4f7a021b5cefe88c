package restore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
)

// integrityDB builds a database of several MiB, many read-ahead windows
// (integrityvfs.go), with what makes SQLite's reads jump: an index on
// random keys (integrity_check looks each row up in it), rows whose
// blobs spill into overflow chains, and a freelist. It is in WAL mode,
// checkpointed, as a restored database is.
func integrityDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	c, err := sqlite3.Open("file:" + path + "?vfs=os")
	require.NoError(t, err)
	for _, sql := range []string{
		"PRAGMA page_size=4096",
		"PRAGMA journal_mode=WAL",
		"CREATE TABLE t(id INTEGER PRIMARY KEY, k, v)",
		"CREATE INDEX tk ON t(k)",
		"INSERT INTO t(k, v) SELECT random(), randomblob(900) FROM generate_series(1, 6000)",
		"INSERT INTO t(k, v) SELECT random(), randomblob(10000) FROM generate_series(1, 100)",
		"INSERT INTO t(k, v) SELECT random(), randomblob(900) FROM generate_series(1, 2000)",
		"DELETE FROM t WHERE id % 7 = 0",
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		require.NoError(t, c.Exec(sql), sql)
	}
	require.NoError(t, c.Close())
	return path
}

// TestIntegrityCheckReadAhead: a sound database many windows long checks
// ok through the read-ahead (reads forward, backward, scattered and across
// window edges return the file's bytes, or SQLite would find it corrupt),
// and checking it leaves the file and its directory as they were.
func TestIntegrityCheckReadAhead(t *testing.T) {
	path := integrityDB(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(before), 4<<20, "the database spans several windows")

	require.NoError(t, restore.IntegrityCheck(t.Context(), path))

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	dbtest.SameBytes(t, "checked file", after, before)
	require.Equal(t, []string{"db.sqlite"}, dirEntries(t, filepath.Dir(path)), "no -wal, -shm or -journal beside it")
}

// TestIntegrityCheckCorruptPage: a table b-tree leaf past the first
// windows, its cell pointers scrambled, is found by the check through the
// read-ahead: ErrIntegrity, which is frames.ErrCorrupt.
func TestIntegrityCheckCorruptPage(t *testing.T) {
	path := integrityDB(t)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	ps := dbtest.PageSize(data)
	leaf := -1
	for pg := len(data) / ps / 2; pg < len(data)/ps; pg++ {
		if data[pg*ps] == 0x0d { // a table b-tree leaf (fileformat.html, the b-tree page header)
			leaf = pg
			break
		}
	}
	require.GreaterOrEqual(t, leaf, 0, "no table leaf in the second half")
	page := data[leaf*ps : (leaf+1)*ps]
	for i := 8; i < 64; i++ { // past the leaf's 8-byte header: its cell pointer array
		page[i] ^= byte(i*7 + 1)
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))

	err = restore.IntegrityCheck(t.Context(), path)
	if !errors.Is(err, restore.ErrIntegrity) || !errors.Is(err, frames.ErrCorrupt) {
		t.Fatalf("got %v, want ErrIntegrity, which is frames.ErrCorrupt", err)
	}
}

// cancelAfter is a context that its own Err cancels at its call
// number after (0: the first): go-sqlite3 asks Err from SQLite's progress handler, so a
// check can be cancelled at any point of its run without timing it.
type cancelAfter struct {
	context.Context
	cancel func()
	calls  int
	after  int // -1: never
}

func newCancelAfter(t *testing.T, after int) *cancelAfter {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return &cancelAfter{Context: ctx, cancel: cancel, after: after}
}

func (c *cancelAfter) Err() error {
	if c.calls == c.after {
		c.cancel()
	}
	c.calls++
	return c.Context.Err()
}

// TestIntegrityCheckInterrupted: a context cancelled before the check, or
// at any point while SQLite prepares or runs it, stops the check with the
// context's error, never an integrity failure (a cancelled restore is not
// a damaged database).
func TestIntegrityCheckInterrupted(t *testing.T) {
	path := integrityDB(t)
	full := newCancelAfter(t, -1)
	require.NoError(t, restore.IntegrityCheck(full, path))
	require.Greater(t, full.calls, 4, "the check asks its context along the way")
	for _, after := range []int{0, 1, full.calls / 4, full.calls / 2, full.calls - 2} {
		err := restore.IntegrityCheck(newCancelAfter(t, after), path)
		require.ErrorIs(t, err, context.Canceled, "cancelled at call %d of %d", after, full.calls)
		require.NotErrorIs(t, err, restore.ErrIntegrity, "cancelled at call %d of %d", after, full.calls)
	}
}
