package capture

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/internal/dbtest"
)

// capWorkload configures one randomized run.
type capWorkload struct {
	pageSize  int
	seed      uint64
	ops       int
	sync      string // synchronous
	autoCkpt  int    // frames; checkpoint (PASSIVE) after a commit leaves this many
	cacheSize int    // pages; small makes SQLite spill into the WAL before commit
	psow      bool   // false: SQLite pads synced commits with copies of the commit frame
	sizeLimit int    // journal_size_limit, -1 for none
	exclusive bool   // locking_mode=EXCLUSIVE (one connection, heap wal-index)
}

func (w capWorkload) String() string {
	s := fmt.Sprintf("page=%d/seed=%d/sync=%s/ckpt=%d/cache=%d/psow=%v", w.pageSize, w.seed, w.sync, w.autoCkpt, w.cacheSize, w.psow)
	if w.exclusive {
		s += "/exclusive"
	}
	return s
}

// TestCaptureRandomWorkload replays randomized workloads through the
// capture and rebuilds a replica from the commits alone. After a complete
// checkpoint the replica must equal the database byte for byte, pass
// integrity_check, hold the same rows, and the capture must have emitted
// exactly one commit per transaction that wrote the WAL (counted
// independently, by SQLite's WAL hook): no padding copy emitted (psow=0),
// nothing of a rolled-back transaction.
func TestCaptureRandomWorkload(t *testing.T) {
	workloads := []capWorkload{
		{pageSize: 4096, seed: 1, ops: 500, sync: "NORMAL", autoCkpt: 1000, cacheSize: 2000, psow: true, sizeLimit: -1},
		{pageSize: 4096, seed: 2, ops: 500, sync: "FULL", autoCkpt: 50, cacheSize: 10, psow: true, sizeLimit: -1},
		{pageSize: 4096, seed: 3, ops: 500, sync: "NORMAL", autoCkpt: 20, cacheSize: 10, psow: false, sizeLimit: 100000},
		{pageSize: 4096, seed: 4, ops: 500, sync: "FULL", autoCkpt: 40, cacheSize: 10, psow: false, sizeLimit: -1},
		{pageSize: 65536, seed: 5, ops: 300, sync: "NORMAL", autoCkpt: 30, cacheSize: 6, psow: true, sizeLimit: -1},
		{pageSize: 65536, seed: 6, ops: 300, sync: "FULL", autoCkpt: 1000, cacheSize: 6, psow: false, sizeLimit: 0},
		{pageSize: 1024, seed: 7, ops: 500, sync: "NORMAL", autoCkpt: 100, cacheSize: 10, psow: true, sizeLimit: -1},
		{pageSize: 1024, seed: 8, ops: 500, sync: "FULL", autoCkpt: 60, cacheSize: 10, psow: false, sizeLimit: -1},
		{pageSize: 4096, seed: 9, ops: 400, sync: "NORMAL", autoCkpt: 40, cacheSize: 10, psow: true, sizeLimit: -1, exclusive: true},
		{pageSize: 4096, seed: 10, ops: 400, sync: "FULL", autoCkpt: 40, cacheSize: 10, psow: false, sizeLimit: -1, exclusive: true},
	}
	for _, w := range workloads {
		t.Run(w.String(), func(t *testing.T) {
			t.Parallel()
			capRunWorkload(t, w)
		})
	}
}

func capRunWorkload(t *testing.T, w capWorkload) {
	v, vfsName, s, path := capSetupWith(t, w.pageSize, "")

	// SQLite's WAL hook runs once per commit that wrote frames (wal.c sets
	// iCallback only then): an independent count of what the capture must
	// emit. A custom hook replaces auto-checkpointing, so it checkpoints
	// as sqlite3WalDefaultHook does.
	hookCommits := 0
	var params []string
	if !w.psow {
		params = append(params, "psow=0")
	}
	open := func() *sqlite3.Conn {
		c := capOpen(t, vfsName, path, params...)
		if w.exclusive {
			dbtest.Exec(t, c, "PRAGMA locking_mode=EXCLUSIVE")
		}
		dbtest.Exec(t, c, fmt.Sprintf("PRAGMA synchronous=%s; PRAGMA cache_size=%d; PRAGMA journal_size_limit=%d",
			w.sync, w.cacheSize, w.sizeLimit))
		c.WALHook(func(c *sqlite3.Conn, schema string, frames int) error {
			hookCommits++
			if frames >= w.autoCkpt {
				c.WALCheckpoint(schema, sqlite3.CHECKPOINT_PASSIVE)
			}
			return nil
		})
		return c
	}
	c1 := open()
	require.Equal(t, "wal", dbtest.Query1(t, c1, "PRAGMA journal_mode"), "journal_mode")
	conns := []*sqlite3.Conn{c1}
	if !w.exclusive {
		conns = append(conns, open())
	}
	dbtest.Exec(t, c1, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b BLOB); CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")

	rnd := rand.New(rand.NewPCG(w.seed, 0))
	// Blob sizes up to 100 KB; rows per statement shrink as blobs grow, so a
	// run stays small enough for the race detector (which instruments
	// SQLite itself: go-sqlite3 is SQLite translated to Go).
	sizes := []int{10, 100, 500, 2000, 5000, 20000, 100000}
	blobRows := func(maxRows int) (string, int) {
		size := sizes[rnd.IntN(len(sizes))]
		rows := 1 + rnd.IntN(max(1, maxRows*2000/max(size, 2000)))
		return fmt.Sprintf("randomblob(%d)", size), rows
	}
	ops := map[string]int{}
	midChecks, rollbacks, spilled := 0, 0, 0
	st := v.state(path)
	txnSeq := func() uint64 {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.txnSeq
	}
	for i := range w.ops {
		c := conns[rnd.IntN(len(conns))]
		var sql, kind string
		switch op := rnd.IntN(100); {
		case op < 28:
			kind = "insert"
			blob, rows := blobRows(20)
			sql = fmt.Sprintf("INSERT INTO t(a,b) SELECT abs(random())%%1000, %s FROM generate_series(1,%d)", blob, rows)
			if rnd.IntN(2) == 0 {
				sql = "BEGIN;" + sql + ";" + sql + "; COMMIT"
			}
		case op < 42:
			kind = "update"
			blob, rows := blobRows(10)
			sql = fmt.Sprintf("UPDATE t SET a=a+1, b=%s WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT %d)", blob, rows)
		case op < 50:
			kind = "delete"
			sql = fmt.Sprintf("DELETE FROM t WHERE a %% %d = 0", 3+rnd.IntN(20))
		case op < 60:
			kind = "kv"
			sql = fmt.Sprintf("INSERT OR REPLACE INTO kv SELECT 'k'||(abs(random())%%5000), hex(randomblob(%d)) FROM generate_series(1,%d)", 1+rnd.IntN(300), 1+rnd.IntN(50))
		case op < 72:
			// A big transaction that spills (small cache), rolled back.
			kind = "rollback"
			blob, rows := blobRows(30)
			sql = fmt.Sprintf("BEGIN; UPDATE t SET b=randomblob(3000) WHERE id %% 3 = 0; INSERT INTO t(a,b) SELECT 1, %s FROM generate_series(1,%d); DELETE FROM kv WHERE k > 'k3'; ROLLBACK", blob, rows)
		case op < 80:
			kind = "savepoint"
			sql = capSavepoints(rnd, blobRows)
		case op < 82:
			kind = "vacuum"
			sql = "VACUUM"
		case op < 85:
			kind = "index"
			if rnd.IntN(2) == 0 {
				sql = "CREATE INDEX IF NOT EXISTS ta ON t(a, b)"
			} else {
				sql = "DROP INDEX IF EXISTS ta"
			}
		case op < 92:
			kind = "checkpoint"
			mode := []sqlite3.CheckpointMode{sqlite3.CHECKPOINT_PASSIVE, sqlite3.CHECKPOINT_FULL, sqlite3.CHECKPOINT_RESTART, sqlite3.CHECKPOINT_TRUNCATE}[rnd.IntN(4)]
			nLog, nCkpt, err := c.WALCheckpoint("main", mode)
			if err != nil && !errors.Is(err, sqlite3.BUSY) {
				t.Fatalf("op %d: checkpoint: %v", i, err)
			}
			ops[kind]++
			if err == nil && nLog == nCkpt {
				// Everything committed is in the database file now.
				capCompareFiles(t, fmt.Sprintf("op %d: after checkpoint mode %d", i, mode), dbtest.FileBytes(t, path), s.replicaBytes(t))
				midChecks++
			}
			continue
		default:
			kind = "delete-random"
			sql = "DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 50)"
		}
		ops[kind]++
		before, seq := s.count(), txnSeq()
		hb := hookCommits
		require.NoError(t, c.Exec(sql), "op %d %q", i, sql)
		if got, want := s.count()-before, hookCommits-hb; got != want {
			t.Errorf("op %d (%s): %d commits captured, SQLite committed %d", i, kind, got, want)
		}
		if kind == "rollback" {
			rollbacks++
			if txnSeq() != seq {
				spilled++ // it wrote frames before rolling back
			}
			n := s.count()
			require.Equal(t, before, n, "op %d: a rolled-back transaction emitted %d commits", i, n-before)
		}
	}

	_, _, err := c1.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(t, err)
	capCompareFiles(t, "final", dbtest.FileBytes(t, path), s.replicaBytes(t))
	s.check(t)
	assert.NoError(t, s.brokenErr(), "capture broke")
	if n := s.count(); n != hookCommits {
		t.Errorf("capture emitted %d commits, SQLite committed %d transactions that wrote the WAL", n, hookCommits)
	}
	st.mu.Lock()
	readBacks, padFrames, rewinds := st.readBacks, st.padFrames, st.rewinds
	st.mu.Unlock()
	if readBacks != 0 {
		t.Errorf("%d frames read back from the WAL; the cache should supply every frame", readBacks)
	}
	if w.cacheSize <= 10 && spilled == 0 {
		t.Errorf("no rolled-back transaction spilled into the WAL (cache_size=%d)", w.cacheSize)
	}
	if w.cacheSize <= 10 && rewinds == 0 {
		t.Errorf("no ROLLBACK TO rewound the WAL over spilled frames (cache_size=%d)", w.cacheSize)
	}
	// SQLite pads only synced commits, only without powersafe overwrite.
	if pads := !w.psow && w.sync == "FULL"; pads != (padFrames > 0) {
		t.Errorf("%d padding frames skipped, want some: %v", padFrames, pads)
	}

	want := capDigest(t, c1)
	rc, err := sqlite3.Open("file:" + s.replica.Name() + "?vfs=os&mode=ro")
	require.NoError(t, err)
	defer rc.Close()
	assert.Equal(t, "ok", dbtest.Query1(t, rc, "PRAGMA integrity_check"), "replica integrity_check")
	if got := capDigest(t, rc); got != want {
		t.Errorf("replica rows %s, database %s", got, want)
	}
	t.Logf("ops %v; %d commits (%d pages), %d padding frames skipped, %d rollbacks (%d spilled) emitted nothing, %d savepoint rewinds, %d mid-run byte checks, %d growth pages never written, rows %s",
		ops, s.count(), s.pagesTotal, padFrames, rollbacks, spilled, rewinds, midChecks, s.growthUnwritten, want)
}

// capSavepoints is a transaction of nested savepoints, as ORMs and
// migration tools write them: writes big enough to spill with a small
// cache, SAVEPOINT, ROLLBACK TO and RELEASE of random levels, ending in
// COMMIT (or now and then ROLLBACK).
func capSavepoints(rnd *rand.Rand, blobRows func(int) (string, int)) string {
	var b strings.Builder
	b.WriteString("BEGIN;")
	var stack []string
	// Writes come first and right after each SAVEPOINT, so that most
	// ROLLBACK TOs have spilled frames on both sides to rewind over.
	wrote := false
	for n := 0; n < 4+rnd.IntN(8); n++ {
		op := rnd.IntN(10)
		if !wrote {
			op = 0
		}
		wrote = op < 5
		switch {
		case op < 4:
			blob, rows := blobRows(30)
			fmt.Fprintf(&b, "INSERT INTO t(a,b) SELECT %d, %s FROM generate_series(1,%d);", n, blob, rows)
		case op < 5:
			fmt.Fprintf(&b, "UPDATE t SET b=randomblob(1500) WHERE id %% %d = 0;", 2+rnd.IntN(5))
		case op < 7:
			name := fmt.Sprintf("s%d", len(stack))
			stack = append(stack, name)
			fmt.Fprintf(&b, "SAVEPOINT %s;", name)
			wrote = false
		case op < 9 && len(stack) > 0:
			// ROLLBACK TO keeps the savepoint open.
			k := rnd.IntN(len(stack))
			fmt.Fprintf(&b, "ROLLBACK TO %s;", stack[k])
			stack = stack[:k+1]
		case len(stack) > 0:
			k := rnd.IntN(len(stack))
			fmt.Fprintf(&b, "RELEASE %s;", stack[k])
			stack = stack[:k]
		}
	}
	if len(stack) > 0 && rnd.IntN(2) == 0 {
		fmt.Fprintf(&b, "ROLLBACK TO %s; INSERT INTO kv VALUES('sp%d', 'after');", stack[0], rnd.Uint64())
	}
	if rnd.IntN(8) == 0 {
		b.WriteString("ROLLBACK")
	} else {
		b.WriteString("COMMIT")
	}
	return b.String()
}

func capCompareFiles(t *testing.T, when string, db, replica []byte) {
	t.Helper()
	dbtest.SameBytes(t, when+": the replica against the database", replica, db)
}
