package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/internal/race"
)

// replWorkload is one randomized workload configuration.
type replWorkload struct {
	seed      uint64
	ops       int
	pageSize  int
	sync      string // synchronous=
	psow      bool
	cacheSize int // pages: small values make big transactions spill
	autoCkpt  int
	exclusive bool // locking_mode=EXCLUSIVE (one connection)
}

func (w replWorkload) String() string {
	return fmt.Sprintf("seed=%d/page=%d/%s/psow=%v/cache=%d/excl=%v", w.seed, w.pageSize, w.sync, w.psow, w.cacheSize, w.exclusive)
}

var replWorkloads = []replWorkload{
	{seed: 1, ops: 300, pageSize: 4096, sync: "NORMAL", psow: true, cacheSize: 2000, autoCkpt: 1000},
	{seed: 2, ops: 300, pageSize: 4096, sync: "FULL", psow: true, cacheSize: 10, autoCkpt: 50},
	{seed: 3, ops: 300, pageSize: 1024, sync: "NORMAL", psow: false, cacheSize: 10, autoCkpt: 20},
	{seed: 4, ops: 200, pageSize: 65536, sync: "FULL", psow: false, cacheSize: 6, autoCkpt: 30},
	{seed: 5, ops: 250, pageSize: 4096, sync: "NORMAL", psow: true, cacheSize: 10, autoCkpt: 40, exclusive: true},
}

// TestReplicateRandomWorkloads replicates randomized workloads to versitygw
// and to a directory bucket, then rebuilds each session from the bucket alone:
// the result is byte-identical to the database after a TRUNCATE checkpoint,
// passes integrity_check, and every checksum of the chain verified on the way.
func TestReplicateRandomWorkloads(t *testing.T) {
	for _, w := range replWorkloads {
		t.Run("s3/"+w.String(), func(t *testing.T) { replRunWorkload(t, buckettest.S3(t), w) })
	}
	for _, w := range replWorkloads[1:2] {
		t.Run("dir/"+w.String(), func(t *testing.T) { replRunWorkload(t, buckettest.Dir(t), w) })
	}
}

func replRunWorkload(t *testing.T, b bucket.Bucket, w replWorkload) {
	cfg := replTestConfig(t, b)
	cfg.PageSize = w.pageSize
	db := replOpen(t, cfg)
	var params []string
	if !w.psow {
		params = append(params, "psow=0")
	}
	open := func() *sqlite3.Conn {
		c := replConn(t, db, params...)
		dbtest.Exec(t, c, fmt.Sprintf("PRAGMA synchronous=%s; PRAGMA cache_size=%d; PRAGMA wal_autocheckpoint=%d",
			w.sync, w.cacheSize, w.autoCkpt))
		if w.exclusive {
			dbtest.Exec(t, c, "PRAGMA locking_mode=EXCLUSIVE")
		}
		return c
	}
	conns := []*sqlite3.Conn{open()}
	if !w.exclusive {
		conns = append(conns, open())
	}
	dbtest.Exec(t, conns[0], "CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b BLOB); CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
	ops := w.ops
	if race.Enabled {
		// The race detector instruments SQLite itself (go-sqlite3 is
		// SQLite translated to Go): a third of the operations keeps every
		// kind of operation and the suite within CI's budget.
		ops /= 3
	}
	commits := runRandomOps(t, conns, w.seed, ops) + 2 // two CREATE TABLE statements

	ctx := t.Context()
	require.NoError(t, db.Durable(ctx))
	st := db.Stats()
	if st.Commits != int64(commits) {
		t.Errorf("captured %d commits, the workload committed %d", st.Commits, commits)
	}
	want := checkpointed(t, conns[0], db.Path())
	got := replaySession(t, b, db.actor, cfg.Epoch)
	dbtest.SameBytes(t, "replayed session vs database", dbtest.FileBytes(t, got.Path), want)
	dbtest.IntegrityOK(t, got.Path)
	if got.Seq != st.Captured {
		t.Fatalf("replay reached sequence %d, captured %d", got.Seq, st.Captured)
	}
	t.Logf("%d commits in %d batches (%d PUTs, %d retries); %d KiB captured, %d KiB merged, %d KiB uploaded; replay applied %d frames",
		st.Commits, st.Batches, st.PUTs, st.Retries, st.BytesRaw>>10, st.BytesMerged>>10, st.BytesUploaded>>10, got.Stats.Frames)
}

// runRandomOps runs a random mix of writes over conns and returns how many
// transactions committed.
func runRandomOps(t *testing.T, conns []*sqlite3.Conn, seed uint64, ops int) int {
	rng := rand.New(rand.NewPCG(seed, 99))
	blob := func() string {
		sizes := []int{10, 100, 500, 2000, 5000, 20000, 100000}
		return fmt.Sprintf("randomblob(%d)", sizes[rng.IntN(len(sizes))])
	}
	commits := 0
	for i := 0; i < ops; i++ {
		c := conns[rng.IntN(len(conns))]
		var sql string
		committed := true
		switch op := rng.IntN(100); {
		case op < 30:
			sql = fmt.Sprintf("INSERT INTO t(a,b) SELECT abs(random())%%1000, %s FROM generate_series(1,%d)", blob(), 1+rng.IntN(8))
			if rng.IntN(2) == 0 {
				sql = "BEGIN;" + sql + ";" + sql + "; COMMIT"
			}
		case op < 45:
			sql = fmt.Sprintf("UPDATE t SET a=a+1, b=%s WHERE id %% %d = %d", blob(), 2+rng.IntN(10), rng.IntN(2))
		case op < 55:
			sql = fmt.Sprintf("DELETE FROM t WHERE a %% %d = 0", 3+rng.IntN(20))
		case op < 65:
			sql = fmt.Sprintf("INSERT OR REPLACE INTO kv SELECT 'k'||(abs(random())%%5000), hex(randomblob(%d)) FROM generate_series(1,%d)", 1+rng.IntN(300), 1+rng.IntN(50))
		case op < 75:
			// A big transaction that spills (small caches) and rolls back.
			sql = fmt.Sprintf("BEGIN; UPDATE t SET b=%s; INSERT INTO t(a,b) SELECT 1, %s FROM generate_series(1,30); DELETE FROM kv WHERE k > 'k3'; ROLLBACK", blob(), blob())
			committed = false
		case op < 82:
			sql = fmt.Sprintf("BEGIN; SAVEPOINT s; UPDATE t SET b=%s; ROLLBACK TO s; RELEASE s; UPDATE t SET a=a-1 WHERE id %% 7 = 0; COMMIT", blob())
		case op < 85:
			sql = "VACUUM"
		case op < 89:
			exists := dbtest.Query1(t, c, "SELECT count(*) FROM sqlite_schema WHERE name='ta'") == "1"
			if rng.IntN(2) == 0 {
				sql = "CREATE INDEX IF NOT EXISTS ta ON t(a, b)"
			} else {
				sql = "DROP INDEX IF EXISTS ta"
			}
			committed = exists == strings.HasPrefix(sql, "DROP")
		case op < 95:
			modes := []sqlite3.CheckpointMode{sqlite3.CHECKPOINT_PASSIVE, sqlite3.CHECKPOINT_FULL, sqlite3.CHECKPOINT_RESTART, sqlite3.CHECKPOINT_TRUNCATE}
			c.WALCheckpoint("main", modes[rng.IntN(len(modes))]) // busy is fine: another connection may be reading
			continue
		default:
			sql = "DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 50)"
		}
		changesBefore := c.TotalChanges()
		require.NoError(t, c.Exec(sql), "op %d %q", i, sql)
		// A statement that changed nothing writes no frame, so SQLite
		// commits nothing (a DELETE matching no row). VACUUM and index
		// changes do not count in total_changes but always write.
		changed := c.TotalChanges() != changesBefore || sql == "VACUUM" || strings.Contains(sql, "INDEX")
		if committed && changed {
			commits++
		}
	}
	return commits
}

// TestCloseFlushesAndRefusesWrites: Close uploads everything, and the
// database refuses writes afterwards instead of committing unreplicated.
func TestCloseFlushesAndRefusesWrites(t *testing.T) {
	b := buckettest.Dir(t)
	cfg := replTestConfig(t, b)
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES(1),(2),(3)")
	require.NoError(t, db.Close(context.Background()))
	require.Error(t, c.Exec("INSERT INTO t VALUES(4)"), "a write after Close succeeded")
	errIs(t, db.Durable(t.Context()), ErrClosed)
	got := replaySession(t, b, db.actor, cfg.Epoch)
	if got.Seq != 2 {
		t.Fatalf("replayed to %d, want 2", got.Seq)
	}
}
