package capture

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/internal/dbtest"
	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCaptureOpenUnattached(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db.sqlite")
	capPrepare(t, path, 4096, "CREATE TABLE t(x)")
	_, name := capRegister(t)
	before := dbtest.FileBytes(t, path)

	c, err := capOpenErr(name, path)
	if err == nil {
		// go-sqlite3 may open lazily; the first statement must fail then.
		err = c.Exec("INSERT INTO t VALUES(1)")
		c.Close()
	}
	if !errors.Is(err, sqlite3.CANTOPEN) || !errors.Is(err, errNotReplicated) {
		t.Fatalf("open of an unattached database: %v, want CANTOPEN and errNotReplicated", err)
	}
	if !strings.Contains(err.Error(), "not under replication") {
		t.Errorf("error %q does not say the database is not under replication", err)
	}
	_, err = os.Stat(path + "-wal")
	assert.Error(t, err, "a WAL was created for an unattached database")
	// A database image: compared as bytes, not diffed.
	if after := dbtest.FileBytes(t, path); string(after) != string(before) {
		t.Error("the unattached database file changed")
	}
}

func TestCaptureAttachTwice(t *testing.T) {
	v, _, _, path := capSetup(t)
	// Another spelling of the same path must be recognised.
	rel, err := filepath.Rel(mustGetwd(t), path)
	require.NoError(t, err)
	_, err = v.attach(rel, Options{Sink: newCapSink(t, filepath.Join(t.TempDir(), "r"), nil)})
	require.ErrorIs(t, err, errAttached, "second attach")
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}

func TestCaptureDetachReattach(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db.sqlite")
	capPrepare(t, path, 4096, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	v, name := capRegister(t)

	s1 := newCapSink(t, filepath.Join(dir, "r1"), dbtest.FileBytes(t, path))
	detach, err := v.attach(path, Options{Sink: s1})
	require.NoError(t, err)
	c, err := capOpenErr(name, path)
	require.NoError(t, err)
	dbtest.Exec(t, c, "INSERT INTO t(v) VALUES('one')")
	detach()
	detach() // idempotent
	// A connection left open across detach has its WAL writes refused.
	err = c.Exec("INSERT INTO t(v) VALUES('after detach')")
	assertReason(t, err, ReasonDetached, "write on a connection open across detach")
	require.NoError(t, c.Close())
	if n := s1.count(); n != 1 {
		t.Fatalf("first attachment captured %d commits, want 1", n)
	}
	if c, err := capOpenErr(name, path); err == nil {
		err = c.Exec("INSERT INTO t(v) VALUES('lost')")
		c.Close()
		require.Error(t, err, "a detached database accepted a write through the capture VFS")
	}

	// Closing the last connection checkpointed and deleted the WAL, so the
	// precondition holds again.
	s2 := newCapSink(t, filepath.Join(dir, "r2"), dbtest.FileBytes(t, path))
	capAttach(t, v, path, s2)
	c2 := capOpen(t, name, path)
	dbtest.Exec(t, c2, "INSERT INTO t(v) VALUES('two'); INSERT INTO t(v) VALUES('three')")
	if n1, n2 := s1.count(), s2.count(); n1 != 1 || n2 != 2 {
		t.Errorf("commits after re-attach: first sink %d (want 1), second %d (want 2)", n1, n2)
	}
	assert.NoError(t, s2.brokenErr(), "re-attached capture broke")
	s1.check(t)
	s2.check(t)
}

func TestCaptureAttachPrecondition(t *testing.T) {
	v, name := capRegister(t)
	dir := t.TempDir()
	sink := newCapSink(t, filepath.Join(dir, "replica"), nil)

	t.Run("missing", func(t *testing.T) {
		_, err := v.attach(filepath.Join(dir, "none.db"), Options{Sink: sink})
		assert.ErrorIs(t, err, errNotPrepared, "attach of a missing file")
	})
	t.Run("rollback journal", func(t *testing.T) {
		path := filepath.Join(dir, "delete.db")
		c, err := sqlite3.Open("file:" + path + "?vfs=os")
		require.NoError(t, err)
		dbtest.Exec(t, c, "CREATE TABLE t(x)")
		c.Close()
		if _, err := v.attach(path, Options{Sink: sink}); !errors.Is(err, errNotPrepared) || !strings.Contains(err.Error(), "WAL mode") {
			t.Errorf("attach of a rollback-journal database: %v, want errNotPrepared naming WAL mode", err)
		}
	})
	t.Run("WAL with content", func(t *testing.T) {
		path := filepath.Join(dir, "busy.db")
		capPrepare(t, path, 4096, "")
		c, err := sqlite3.Open("file:" + path + "?vfs=os")
		require.NoError(t, err)
		defer c.Close()
		dbtest.Exec(t, c, "CREATE TABLE t(x)") // stays in the WAL while c is open
		if _, err := v.attach(path, Options{Sink: sink}); !errors.Is(err, errNotPrepared) || !strings.Contains(err.Error(), "wal_checkpoint") {
			t.Errorf("attach with frames in the WAL: %v, want errNotPrepared with a hint", err)
		}
	})
	t.Run("WAL written before the first open", func(t *testing.T) {
		path := filepath.Join(dir, "late.db")
		capPrepare(t, path, 4096, "")
		s := newCapSink(t, filepath.Join(dir, "late-replica"), nil)
		detach, err := v.attach(path, Options{Sink: s})
		require.NoError(t, err)
		defer detach()
		c, err := sqlite3.Open("file:" + path + "?vfs=os")
		require.NoError(t, err)
		defer c.Close()
		dbtest.Exec(t, c, "CREATE TABLE t(x)")
		cc, err := capOpenErr(name, path)
		if err == nil {
			err = cc.Exec("SELECT * FROM t")
			cc.Close()
		}
		assert.ErrorIs(t, err, sqlite3.CANTOPEN, "first open with a WAL written by another connection")
		assert.ErrorIs(t, s.brokenErr(), errNotPrepared, "sink.broken")
	})
}

// TestCaptureForeignWriter: a connection that does not go through the
// capture (the plain os VFS, in this process) writes the database. The
// capture must notice at its next write, break replication, and refuse
// every WAL write from then on.
func TestCaptureForeignWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind error
		// between runs after the capture's first commit, before the foreign write.
		between func(t *testing.T, c *sqlite3.Conn)
		// after runs after the foreign write, before the capture writes again.
		after func(t *testing.T, c *sqlite3.Conn)
	}{
		{"appends after our frames", errFrameGap, nil, nil},
		// Its restart carries salt-1 + 1; our next frame carries its salts.
		{"restarts the WAL after a checkpoint", errGeneration, func(t *testing.T, c *sqlite3.Conn) {
			_, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
			require.NoError(t, err)
		}, nil},
		{"writes the emptied WAL", errGeneration, func(t *testing.T, c *sqlite3.Conn) {
			_, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
			require.NoError(t, err)
		}, nil},
		// Our own checkpoint copies the foreign commit into the database and
		// our next write restarts the WAL with a legal salt-1 + 1: only the
		// foreign frames left past ours give it away.
		{"appends, then we checkpoint and restart", errFrameGap, nil, func(t *testing.T, c *sqlite3.Conn) {
			_, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
			require.NoError(t, err)
		}},
		{"appends, then we truncate the WAL", errFrameGap, nil, func(t *testing.T, c *sqlite3.Conn) {
			c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, name, s, path := capSetup(t)
			c := capOpen(t, name, path)
			dbtest.Exec(t, c, "INSERT INTO t(v) VALUES('captured')")
			if tc.between != nil {
				tc.between(t, c)
			}

			foreign, err := sqlite3.Open("file:" + path + "?vfs=os")
			require.NoError(t, err)
			defer foreign.Close()
			dbtest.Exec(t, foreign, "INSERT INTO t(v) VALUES('foreign')")
			require.NoError(t, s.brokenErr(), "broken before the capture wrote again")
			if tc.after != nil {
				tc.after(t, c)
			}

			// SQLite reports the code (refusal.go); the cause goes to the
			// sink.
			err = c.Exec("INSERT INTO t(v) VALUES('after')")
			assertReason(t, err, ReasonBroken, "write after a foreign commit")
			if !errors.Is(s.brokenErr(), tc.kind) {
				t.Errorf("sink.broken: %v, want %v", s.brokenErr(), tc.kind)
			}
			err = c.Exec("INSERT INTO t(v) VALUES('refused')")
			assertReason(t, err, ReasonBroken, "write after broken")
			t.Logf("broken: %v", s.brokenErr())
			if n := s.count(); n != 1 {
				t.Errorf("%d commits captured, want 1", n)
			}
			s.check(t)
		})
	}
}

// TestCaptureNotWAL: switching an attached database out of WAL mode writes
// the database file directly; the capture refuses it and breaks.
func TestCaptureNotWAL(t *testing.T) {
	_, name, s, path := capSetup(t)
	c := capOpen(t, name, path)
	dbtest.Exec(t, c, "INSERT INTO t(v) VALUES('captured')")
	before := dbtest.FileBytes(t, path)

	mode, merr := "", c.Exec("PRAGMA journal_mode=DELETE")
	if merr == nil {
		mode = dbtest.Query1(t, c, "PRAGMA journal_mode")
	}
	werr := c.Exec("INSERT INTO t(v) VALUES('uncaptured')")
	require.Error(t, werr, "a write succeeded after journal_mode=DELETE (pragma: %v, mode %q)", merr, mode)
	assert.ErrorIs(t, s.brokenErr(), errForeignWrite, "sink.broken")
	c.Close()
	// Whatever reached the file went through a checkpoint: the database holds
	// the captured row and nothing else.
	rc, err := sqlite3.Open("file:" + path + "?vfs=os")
	require.NoError(t, err)
	defer rc.Close()
	if got := dbtest.Query1(t, rc, "SELECT group_concat(v) FROM t"); got != "captured" {
		t.Errorf("rows after the refused writes: %q (file was %d bytes)", got, len(before))
	}
}

// TestCaptureNotWritable: while the sink says it cannot take commits, WAL
// writes fail with its error and nothing is emitted; replication is not
// broken by it.
func TestCaptureNotWritable(t *testing.T) {
	_, name, s, path := capSetup(t)
	c := capOpen(t, name, path)
	dbtest.Exec(t, c, "INSERT INTO t(v) VALUES('one')")
	stop := errors.New("backlog full")
	s.notWritable.Store(&stop)
	require.ErrorIs(t, c.Exec("INSERT INTO t(v) VALUES('refused')"), sqlite3.IOERR_WRITE, "write while not writable")
	s.notWritable.Store(nil)
	dbtest.Exec(t, c, "INSERT INTO t(v) VALUES('two')")
	if n := s.count(); n != 2 {
		t.Errorf("%d commits, want 2", n)
	}
	assert.NoError(t, s.brokenErr(), "broken")
	assert.Equal(t, "one,two", dbtest.Query1(t, c, "SELECT group_concat(v) FROM t"), "rows")
	s.check(t)
}

// TestCapturePhaseTwo: the sink hears the end of every committed
// transaction, after the commit itself; an error it returns there fails
// the statement with the error's refusal code, and the commit stays (it is
// in the WAL, and was handed to the sink), as Sync mode documents.
func TestCapturePhaseTwo(t *testing.T) {
	_, name, s, path := capSetup(t)
	c := capOpen(t, name, path)
	for i := range 3 {
		dbtest.Exec(t, c, "INSERT INTO t(v) VALUES('ok')")
		if got, commits := s.phaseTwos.Load(), s.count(); got != int64(i+1) || commits != i+1 {
			t.Fatalf("after %d commits: %d phase twos, %d commits handed to the sink", i+1, got, commits)
		}
	}
	late := Refuse(12, errors.New("not confirmed in time"))
	s.phaseTwoErr.Store(&late)
	err := c.Exec("INSERT INTO t(v) VALUES('unconfirmed')")
	assertReason(t, err, 12, "statement whose phase two failed")
	s.phaseTwoErr.Store(nil)
	if n := s.count(); n != 4 {
		t.Errorf("%d commits handed to the sink, want 4", n)
	}
	assert.Equal(t, "ok,ok,ok,unconfirmed", dbtest.Query1(t, c, "SELECT group_concat(v) FROM t"), "rows")
	s.check(t)
}

// assertReason fails the test unless err is a statement's failure with
// reason r.
func assertReason(t testing.TB, err error, r Reason, what string) {
	t.Helper()
	if got, ok := ReasonOf(err); !ok || got != r {
		t.Errorf("%s: %v: reason %d (%v), want %d", what, err, got, ok, r)
	}
}
