package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
)

// With a bucket that fails, loses responses and lags, the session still
// replays to exactly the database: nothing skipped, nothing duplicated in a
// way that changes the result.
func TestFaultyBucketReplaysExactly(t *testing.T) {
	inner := buckettest.Dir(t)
	faulty := buckettest.NewFaulty(inner, buckettest.FaultConfig{
		Seed: 3, ErrorRateByOp: map[string]float64{"put": 0.25}, LostResponseRate: 0.15,
		MinLatency: 100 * time.Microsecond, MaxLatency: 3 * time.Millisecond,
	})
	cfg := replTestConfig(t, faulty)
	cfg.Bucket = faulty
	// The first snapshot goes through the faulty bucket too, but Open
	// does not retry it: give it a clean start, then fail only log PUTs.
	cfg.Bucket = inner
	// Unpaced: the workload takes less than the directory bucket's default
	// interval, and the faults need many uploads to happen.
	cfg.UploadInterval = -1
	db := replOpen(t, cfg)
	db.rep.cfg.Bucket = faulty
	c := replConn(t, db)
	c2 := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b BLOB); CREATE TABLE kv(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
	commits := runRandomOps(t, []*sqlite3.Conn{c, c2}, 11, 200) + 2
	require.NoError(t, db.Durable(t.Context()))
	st := db.Stats()
	fc := faulty.Counts()
	if st.Commits != int64(commits) {
		t.Errorf("captured %d commits, the workload committed %d", st.Commits, commits)
	}
	if st.Retries == 0 || fc.Errors == 0 || fc.LostResponses == 0 {
		t.Fatalf("the faults did not happen: %+v, %d retries", fc, st.Retries)
	}
	want := checkpointed(t, c, db.Path())
	got := replaySession(t, inner, db.actor, cfg.Epoch)
	dbtest.SameBytes(t, "replayed session vs database", dbtest.FileBytes(t, got.Path), want)
	dbtest.IntegrityOK(t, got.Path)
	t.Logf("%d commits, %d batches, %d PUTs, %d retries; faults: %+v", st.Commits, st.Batches, st.PUTs, st.Retries, fc)
}

// A hundred updates of one row in one batch upload one page.
func TestHundredUpdatesUploadOnePage(t *testing.T) {
	inner := buckettest.Dir(t)
	gate := buckettest.NewGate(inner, isLogKey)
	cfg := replTestConfig(t, gate)
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t VALUES(1, 0)")
	require.NoError(t, db.Durable(t.Context()))
	// The uploader takes the first update's batch and waits at the gate;
	// the next hundred pile up in one batch behind it.
	gate.Hold()
	dbtest.Exec(t, c, "UPDATE t SET n = n + 1")
	waitInflight(t, db.rep, db.Stats().Captured)
	for range 100 {
		dbtest.Exec(t, c, "UPDATE t SET n = n + 1")
	}
	gate.Release()
	require.NoError(t, db.Durable(t.Context()))
	var found bool
	for o, err := range bucket.All(t.Context(), inner, db.actor.LogPrefix()) {
		require.NoError(t, err)
		data, _, err := bucket.ReadAll(t.Context(), inner, o.Key, 1<<20)
		require.NoError(t, err)
		hdr, fs, err := frames.ReadBatch(bytes.NewReader(data), o.Key, frames.Limits{})
		require.NoError(t, err)
		if hdr.LastSeq-hdr.FirstSeq+1 == 100 {
			found = true
			if len(fs) != 1 || len(fs[0].SQLite.Pages) != 1 {
				t.Fatalf("batch %s of 100 updates holds %d frames, %d pages", o.Key, len(fs), len(fs[0].SQLite.Pages))
			}
			t.Logf("%s: 100 commits, 1 frame, 1 page, %d bytes", o.Key, len(data))
		}
	}
	if !found {
		t.Fatal("no batch of exactly the 100 updates")
	}
}

// A bucket that is down fills the backlog; past MaxPendingBytes writes wait,
// then fail with ErrBackpressure instead of hanging, and nothing is lost
// once the bucket comes back.
func TestBackpressure(t *testing.T) {
	gate := heldGate(buckettest.Dir(t))
	cfg := replTestConfig(t, gate)
	cfg.MaxPendingBytes = 64 << 10
	cfg.BackpressureTimeout = 200 * time.Millisecond
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
	var err error
	n := 0
	for ; n < 100; n++ {
		if err = c.Exec("INSERT INTO t(b) VALUES(randomblob(8000))"); err != nil {
			break
		}
	}
	require.Error(t, err, "100 inserts of 8 KB against a 64 KiB backlog and a dead bucket all succeeded")
	if st := db.Stats(); st.BackpressureFailures == 0 || !errors.Is(db.rep.writable(), ErrBackpressure) {
		t.Fatalf("failure was not backpressure: %v, %+v", err, st)
	}
	t.Logf("write %d refused: %v", n+1, err)
	gate.Release()
	require.NoError(t, db.Durable(t.Context()))
	// Writable again once the backlog drained.
	dbtest.Exec(t, c, "INSERT INTO t(b) VALUES(1)")
	require.NoError(t, db.Durable(t.Context()))
	want := checkpointed(t, c, db.Path())
	got := replaySession(t, gate.Bucket, db.actor, cfg.Epoch)
	dbtest.SameBytes(t, "replayed session vs database", dbtest.FileBytes(t, got.Path), want)
}

// Sync mode: a commit returns only once it is in the bucket; when that
// cannot happen in time, the statement fails.
func TestSyncMode(t *testing.T) {
	gate := heldGate(buckettest.Dir(t))
	cfg := replTestConfig(t, gate)
	cfg.Mode = Sync
	cfg.SyncTimeout = 300 * time.Millisecond
	db := replOpen(t, cfg)
	c := replConn(t, db)
	err := c.Exec("CREATE TABLE t(x)")
	if !errors.Is(err, sqlite3.IOERR) {
		t.Fatalf("commit with the bucket down: %v, want an I/O error", err)
	}
	gate.Release()
	require.NoError(t, db.Durable(t.Context()))
	// SQLite's pager stays in the error state until the next statement
	// rolls it back; later commits work and each is durable on return.
	c.Exec("SELECT 1")
	for i := range 5 {
		dbtest.Exec(t, c, fmt.Sprintf("INSERT INTO t VALUES(%d)", i))
		if st := db.Stats(); st.Durable != st.Captured {
			t.Fatalf("sync commit returned with durable %d < captured %d", st.Durable, st.Captured)
		}
	}
}

// After a fence, nothing is acknowledged and writes are refused.
func TestFenceStopsAcknowledgement(t *testing.T) {
	cfg := replTestConfig(t, buckettest.Dir(t))
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES(1)")
	require.NoError(t, db.Durable(t.Context()))
	db.Fence()
	errIs(t, db.Durable(t.Context()), ErrFenced)
	require.Error(t, c.Exec("INSERT INTO t VALUES(2)"), "a fenced database took a write")
	errIs(t, db.Stats().Stopped, ErrFenced)
}

// An acknowledgement hook that refuses (an expired lease) keeps Durable
// from reporting success.
func TestAcknowledgeHook(t *testing.T) {
	cfg := replTestConfig(t, buckettest.Dir(t))
	lease := errors.New("lease expired")
	var refuse bool
	cfg.Acknowledge = func() error {
		if refuse {
			return lease
		}
		return nil
	}
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(x)")
	require.NoError(t, db.Durable(t.Context()))
	refuse = true
	dbtest.Exec(t, c, "INSERT INTO t VALUES(1)")
	errIs(t, db.Durable(t.Context()), lease)
}

// A write the capture cannot account for (a writer outside the VFS) stops
// replication loudly: Durable reports it and writes are refused.
func TestForeignWriterStopsReplication(t *testing.T) {
	cfg := replTestConfig(t, buckettest.Dir(t))
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES(1)")
	require.NoError(t, db.Durable(t.Context()))
	foreign, err := sqlite3.Open("file:" + db.Path() + "?vfs=os")
	require.NoError(t, err)
	defer foreign.Close()
	foreign.BusyTimeout(5e9)
	dbtest.Exec(t, foreign, "INSERT INTO t VALUES(2)")
	c.Exec("INSERT INTO t VALUES(3)") // sees the foreign frame: must break
	errIs(t, db.Durable(t.Context()), ErrStopped)
	require.Error(t, c.Exec("INSERT INTO t VALUES(4)"), "replication stopped but the database took a write")
}

// Durable honours its context.
func TestDurableContext(t *testing.T) {
	gate := heldGate(buckettest.Dir(t))
	db := replOpen(t, replTestConfig(t, gate))
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(x)")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	errIs(t, db.Durable(ctx), context.DeadlineExceeded)
	gate.Release()
}
