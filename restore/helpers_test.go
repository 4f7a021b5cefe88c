package restore_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/internal/race"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// scaled cuts n under the race detector, keeping at least 1: it
// instruments SQLite itself, about five times slower, so workloads are cut
// to keep the package's tests within budget.
func scaled(n int) int {
	if race.Enabled {
		return max(1, n/3)
	}
	return n
}

// point is the database as it was at a durable frame boundary: the oracle
// a restore to that point must reproduce byte for byte.
type point struct {
	seq  frames.Seq
	time time.Time // after every commit through seq, before any later one
	data []byte
}

// workload drives one replicated actor and records points.
type workload struct {
	t        testing.TB
	b        bucket.Bucket
	cfg      session.Config
	db       *framectl.DB
	conns    []*sqlite3.Conn
	actor    frames.Actor
	rng      *rand.Rand
	points   []point
	pageSize int
	// tiny makes every row a few dozen bytes, for the corruption sweep,
	// which damages every byte of every object.
	tiny bool
}

// newWorkload opens a fresh actor (session 1) in namespace ns, and records
// its starting point (frame 0).
func newWorkload(t testing.TB, b bucket.Bucket, ns string, seed uint64, pageSize int) *workload {
	t.Helper()
	id := make([]byte, 8)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range id {
		id[i] = byte(rng.UintN(256))
	}
	w := &workload{t: t, b: b, rng: rng, pageSize: pageSize,
		cfg: session.Config{Bucket: b, Namespace: ns, Actor: id, Epoch: 1, Dir: t.TempDir(), PageSize: pageSize,
			RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond,
			DisableCompaction: true}, // the oracle needs every batch kept
		actor: frames.Actor{Namespace: frames.NamespaceID("", ns), Actor: frames.ActorKey(id)},
	}
	w.open()
	w.exec(0, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b BLOB); CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
	return w
}

func (w *workload) open() {
	t := w.t
	t.Helper()
	db, err := framectl.Open(t.Context(), w.cfg)
	require.NoError(t, err)
	w.db = db
	t.Cleanup(func() { w.closeDB() })
	w.conns = nil
	for range 2 {
		c, err := db.Conn()
		require.NoError(t, err)
		w.conns = append(w.conns, c)
		w.exec(len(w.conns)-1, "PRAGMA cache_size=20; PRAGMA wal_autocheckpoint=50")
	}
	w.durable() // the session's starting point: its first snapshot
}

func (w *workload) closeDB() {
	for _, c := range w.conns {
		c.Close()
	}
	w.conns = nil
	if w.db != nil {
		assert.NoError(w.t, w.db.Close(context.Background()), "closing the database")
		w.db = nil
	}
}

// newSession closes the database and opens it again as session epoch,
// which starts with a snapshot of the local copy.
func (w *workload) newSession(epoch frames.Epoch) {
	w.t.Helper()
	w.closeDB()
	w.cfg.Epoch = epoch
	w.open()
}

func (w *workload) exec(conn int, sql string) {
	w.t.Helper()
	require.NoError(w.t, w.conns[conn].Exec(sql), "%s", sql)
}

// ops runs n random operations: inserts, updates and deletes of blobs of
// mixed sizes, key-value upserts, rolled-back and savepoint transactions,
// VACUUM (which shrinks the file), index changes and checkpoints, over two
// connections.
func (w *workload) ops(n int) {
	t, rng := w.t, w.rng
	t.Helper()
	blob := func() string {
		sizes := []int{10, 100, 700, 2000, 5000}
		if w.tiny {
			sizes = []int{4, 8, 16}
		}
		return fmt.Sprintf("randomblob(%d)", sizes[rng.IntN(len(sizes))])
	}
	rows := func(n int) int {
		if w.tiny {
			return 1
		}
		return 1 + rng.IntN(n)
	}
	size := func(n int) int {
		if w.tiny {
			return 1 + rng.IntN(8)
		}
		return 1 + rng.IntN(n)
	}
	for i := 0; i < n; i++ {
		ci := rng.IntN(len(w.conns))
		c := w.conns[ci]
		var sql string
		switch op := rng.IntN(100); {
		case op < 35:
			sql = fmt.Sprintf("INSERT INTO t(a,b) SELECT abs(random())%%1000, %s FROM generate_series(1,%d)", blob(), rows(6))
		case op < 50:
			sql = fmt.Sprintf("UPDATE t SET a=a+1, b=%s WHERE id %% %d = %d", blob(), 2+rng.IntN(8), rng.IntN(2))
		case op < 60:
			sql = fmt.Sprintf("DELETE FROM t WHERE a %% %d = 0", 3+rng.IntN(10))
		case op < 72:
			sql = fmt.Sprintf("INSERT OR REPLACE INTO kv SELECT 'k'||(abs(random())%%500), hex(randomblob(%d)) FROM generate_series(1,%d)", size(200), rows(20))
		case op < 78:
			sql = fmt.Sprintf("BEGIN; UPDATE t SET b=%s; DELETE FROM kv WHERE k > 'k3'; ROLLBACK", blob())
		case op < 83:
			sql = fmt.Sprintf("BEGIN; SAVEPOINT s; UPDATE t SET b=%s; ROLLBACK TO s; RELEASE s; UPDATE t SET a=a-1 WHERE id %% 5 = 0; COMMIT", blob())
		case op < 86:
			sql = "VACUUM"
		case op < 90:
			sql = "CREATE INDEX IF NOT EXISTS ta ON t(a)"
			if rng.IntN(2) == 0 {
				sql = "DROP INDEX IF EXISTS ta"
			}
		case op < 96:
			modes := []sqlite3.CheckpointMode{sqlite3.CHECKPOINT_PASSIVE, sqlite3.CHECKPOINT_TRUNCATE}
			c.WALCheckpoint("main", modes[rng.IntN(len(modes))]) // busy is fine
			continue
		default:
			sql = "DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 20)"
		}
		require.NoError(t, c.Exec(sql), "op %d %q", i, sql)
	}
}

// durable waits until everything is in the bucket and records the point:
// the database bytes after a TRUNCATE checkpoint, the durable frame, and a
// time after every commit so far and before any later one.
func (w *workload) durable() point {
	t := w.t
	t.Helper()
	require.NoError(t, w.db.Durable(t.Context()))
	st := w.db.Stats()
	if st.Durable != st.Captured {
		t.Fatalf("durable %d, captured %d", st.Durable, st.Captured)
	}
	_, _, err := w.conns[0].WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(t, err)
	data, err := os.ReadFile(w.db.Path())
	require.NoError(t, err)
	p := point{seq: st.Durable, time: time.Now(), data: data}
	// Commits after this point must carry a later time than p.time.
	for !time.Now().After(p.time) {
	}
	w.points = append(w.points, p)
	return p
}

// durableOps runs n random operations (ops) and records the point they
// are durable at (durable).
func (w *workload) durableOps(n int) point {
	w.t.Helper()
	w.ops(n)
	return w.durable()
}

// restoreTo restores the workload's actor to a new file and returns it.
func restoreTo(t testing.TB, b bucket.Bucket, a frames.Actor, target restore.Target) (restore.Result, []byte) {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "restored.db")
	res, err := restore.Restore(t.Context(), b, a, dest, restore.Options{Target: target})
	require.NoError(t, err, "restore to %s", target)
	data, err := os.ReadFile(dest)
	require.NoError(t, err)
	if int64(len(data)) != res.Bytes {
		t.Fatalf("restored %d bytes, result says %d", len(data), res.Bytes)
	}
	got, _, err := frames.DatabaseChecksum(bytes.NewReader(data), dbtest.PageSize(data))
	if err != nil || got != res.Checksum {
		t.Fatalf("restored file checksum %s (err %v), result says %s", got, err, res.Checksum)
	}
	return res, data
}

// dirEntries lists the names in dir.
func dirEntries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// snapshotNow returns the database's bytes after a TRUNCATE checkpoint,
// without waiting for the bucket.
func (w *workload) snapshotNow() []byte {
	w.t.Helper()
	_, _, err := w.conns[0].WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(w.t, err)
	data, err := os.ReadFile(w.db.Path())
	require.NoError(w.t, err)
	return data
}

// isLogKey matches the keys of batches, the uploads a gate holds
// (buckettest.Gate).
func isLogKey(key string) bool {
	k, err := frames.ParseKey(key)
	return err == nil && k.Kind == frames.KeyLog
}

// hide deletes an object and returns a function that puts it back.
func hide(t testing.TB, b bucket.Bucket, key string) func() {
	t.Helper()
	data, _, err := bucket.ReadAll(t.Context(), b, key, 1<<30)
	require.NoError(t, err)
	require.NoError(t, b.Delete(t.Context(), key))
	return func() {
		t.Helper()
		_, err := b.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
		require.NoError(t, err)
	}
}

var errGap = lanes.ErrGap
