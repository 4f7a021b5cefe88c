package framectl_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/session"
)

// A write that replication refused says why, through go-sqlite3 and
// database/sql alike (Refusal), and is still an I/O error to SQLite.
func TestRefusal(t *testing.T) {
	b := buckettest.Dir(t)
	// The extended codes are part of the API (refusal.go): an application
	// in another language reads them, not Refusal. SQLITE_IOERR is 10.
	codes := map[error]sqlite3.ExtendedErrorCode{
		session.ErrFenced:       0xF10A,
		session.ErrBackpressure: 0xF20A,
		session.ErrStopped:      0xF30A,
		session.ErrClosed:       0xF40A,
		session.ErrSyncTimeout:  0xF50A,
	}
	check := func(t *testing.T, what string, err, want error) {
		t.Helper()
		r := framectl.Refusal(err)
		if !errors.Is(r, want) || !errors.Is(err, sqlite3.IOERR) {
			t.Fatalf("%s: %v (refusal %v), want an I/O error whose refusal is %v", what, err, r, want)
		}
		if code, ok := errors.AsType[sqlite3.ExtendedErrorCode](err); !ok || code != codes[want] {
			t.Errorf("%s: extended code %#x, want %#x", what, code, codes[want])
		}
		for _, other := range []error{session.ErrFenced, session.ErrBackpressure, session.ErrStopped, session.ErrClosed, session.ErrSyncTimeout} {
			if other != want && errors.Is(r, other) {
				t.Errorf("%s: refusal %v also matches %v", what, r, other)
			}
		}
	}
	t.Run("fenced", func(t *testing.T) {
		db := openDB(t, testConfig(t, b))
		c := conn(t, db)
		dbtest.Exec(t, c, "CREATE TABLE t(x)")
		db.Fence()
		check(t, "write after a fence", c.Exec("INSERT INTO t VALUES(1)"), session.ErrFenced)
		sdb, err := sql.Open("sqlite3", db.DSN())
		require.NoError(t, err)
		defer sdb.Close()
		_, err = sdb.Exec("INSERT INTO t VALUES(2)")
		check(t, "database/sql write after a fence", err, session.ErrFenced)
	})
	t.Run("backpressure", func(t *testing.T) {
		g := heldGate(b)
		cfg := testConfig(t, g)
		cfg.MaxPendingBytes, cfg.BackpressureTimeout = 1, 50*time.Millisecond
		db := openDB(t, cfg)
		defer g.Release()
		c := conn(t, db)
		var err error
		for i := 0; i < 100 && err == nil; i++ {
			err = c.Exec("CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(randomblob(5000))")
		}
		check(t, "write over a full backlog", err, session.ErrBackpressure)
	})
	t.Run("closed", func(t *testing.T) {
		db := openDB(t, testConfig(t, b))
		c := conn(t, db)
		dbtest.Exec(t, c, "CREATE TABLE t(x)")
		require.NoError(t, db.Close(t.Context()))
		check(t, "write after Close", c.Exec("INSERT INTO t VALUES(1)"), session.ErrClosed)
	})
	t.Run("sync timeout", func(t *testing.T) {
		g := heldGate(b)
		cfg := testConfig(t, g)
		cfg.Mode, cfg.SyncTimeout = session.Sync, 50*time.Millisecond
		db := openDB(t, cfg)
		defer g.Release()
		c := conn(t, db)
		check(t, "sync commit with the bucket down", c.Exec("CREATE TABLE t(x)"), session.ErrSyncTimeout)
	})
	t.Run("stopped", func(t *testing.T) {
		db := openDB(t, testConfig(t, b))
		c := conn(t, db)
		dbtest.Exec(t, c, "CREATE TABLE t(x)")
		// Another writer, outside the capture, commits to the WAL: the
		// capture sees the gap at the next write and stops replication.
		foreign, err := sqlite3.Open("file:" + db.Path() + "?vfs=os")
		require.NoError(t, err)
		dbtest.Exec(t, foreign, "INSERT INTO t VALUES('foreign')")
		require.NoError(t, foreign.Close())
		check(t, "write after a foreign commit", c.Exec("INSERT INTO t VALUES(1)"), session.ErrStopped)
		check(t, "write after replication stopped", c.Exec("INSERT INTO t VALUES(2)"), session.ErrStopped)
	})
	if err := framectl.Refusal(sqlite3.IOERR_WRITE); err != nil {
		t.Errorf("Refusal of a plain I/O error: %v, want nil", err)
	}
	if err := framectl.Refusal(errors.New("other")); err != nil {
		t.Errorf("Refusal of another error: %v, want nil", err)
	}
}
