package capture

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/framectl/framectl/internal/dbtest"
	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCaptureConcurrentPool: eight goroutines write through a database/sql
// pool of eight connections, each with its own WAL handle on one shared
// capture state. Commits reach the sink one at a time, every transaction
// that wrote the WAL is emitted once, and the replica equals the database.
func TestCaptureConcurrentPool(t *testing.T) {
	_, name, s, path := capSetupWith(t, 4096, "CREATE TABLE t(id INTEGER PRIMARY KEY, w INT, b BLOB)")

	var hookCommits atomic.Int64
	db, err := driver.Open("file:"+path+"?vfs="+name+"&_pragma=busy_timeout(20000)&_pragma=synchronous(normal)&_pragma=cache_size(20)",
		func(c *sqlite3.Conn) error {
			// One count per commit that wrote the WAL; checkpoints as the
			// default hook would (the custom hook replaces it).
			c.WALHook(func(c *sqlite3.Conn, schema string, frames int) error {
				hookCommits.Add(1)
				if frames >= 200 {
					c.WALCheckpoint(schema, sqlite3.CHECKPOINT_PASSIVE)
				}
				return nil
			})
			return nil
		})
	require.NoError(t, err)
	defer db.Close()
	const workers = 8
	db.SetMaxOpenConns(workers)
	db.SetMaxIdleConns(workers)
	ctx := context.Background()

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 120 {
				var err error
				switch i % 6 {
				case 0, 1, 2:
					_, err = db.ExecContext(ctx, "INSERT INTO t(w,b) VALUES(?, randomblob(abs(random())%6000))", w)
				case 3:
					_, err = db.ExecContext(ctx, "UPDATE t SET b=randomblob(300) WHERE w=? AND id%3=0", w)
				case 4:
					// Spills (small cache) and rolls back; another connection
					// may then write over its frames.
					tx, e := db.BeginTx(ctx, nil)
					if e == nil {
						_, e = tx.ExecContext(ctx, "UPDATE t SET b=randomblob(4000) WHERE w=?", w)
						if rerr := tx.Rollback(); e == nil {
							e = rerr
						}
					}
					err = e
				case 5:
					if i%30 == 5 {
						_, err = db.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_checkpoint(%s)", []string{"PASSIVE", "RESTART", "TRUNCATE"}[(i/30+w)%3]))
					} else {
						_, err = db.ExecContext(ctx, "DELETE FROM t WHERE w=? AND id%5=0", w)
					}
				}
				if err != nil {
					t.Errorf("worker %d op %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	var busy, nLog, nCkpt int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &nLog, &nCkpt); err != nil || busy != 0 {
		t.Fatalf("final checkpoint: busy=%d err=%v", busy, err)
	}
	capCompareFiles(t, "after concurrent writers", dbtest.FileBytes(t, path), s.replicaBytes(t))
	s.check(t)
	assert.NoError(t, s.brokenErr(), "capture broke")
	if n := int64(s.count()); n != hookCommits.Load() {
		t.Errorf("captured %d commits, SQLite committed %d transactions that wrote the WAL", n, hookCommits.Load())
	}
	t.Logf("%d commits from %d connections; at most %d commits handed to the sink at once", s.count(), workers, s.maxInCommit.Load())
}
