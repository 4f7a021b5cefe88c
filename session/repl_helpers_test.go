package session

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/lanes"
)

// replTestConfig returns a config for a fresh actor in b.
func replTestConfig(t testing.TB, b bucket.Bucket) Config {
	id := make([]byte, 8)
	rand.Read(id)
	// Background compaction off: replaySession lists then reads, and a
	// pass in between would delete what it listed. TestBackgroundCompaction
	// covers it.
	return Config{Bucket: b, Namespace: "test", Actor: id, Epoch: 1, Dir: t.TempDir(), RetryMin: 5e6, RetryMax: 50e6,
		DisableCompaction: true}
}

func replOpen(t testing.TB, cfg Config) *DB {
	t.Helper()
	db, err := openDB(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func replConn(t testing.TB, db *DB, params ...string) *sqlite3.Conn {
	t.Helper()
	c, err := db.Conn(params...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// replayed is a session rebuilt from the bucket alone.
type replayed struct {
	Path    string     // the rebuilt database file
	Seq     frames.Seq // last sequence applied
	Batches int
	Stats   lanes.Stats
}

// replaySession rebuilds what the bucket holds of one session: its newest
// snapshot, then every batch after it, through package lanes (which checks
// the checksum chain frame by frame), then a full checksum of the result.
func replaySession(t testing.TB, b bucket.Bucket, a frames.Actor, epoch frames.Epoch) replayed {
	t.Helper()
	ctx := t.Context()
	page, err := b.List(ctx, a.SnapshotSessionPrefix(epoch), "", 1)
	require.NoError(t, err)
	if len(page.Objects) == 0 {
		t.Fatalf("no snapshot for session %d of %s", epoch, a.Prefix())
	}
	snapKey := page.Objects[0].Key
	rc, _, err := b.Get(ctx, snapKey)
	require.NoError(t, err)
	sr, m, err := frames.OpenSnapshot(rc, snapKey, frames.Limits{})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "replay")
	require.NoError(t, os.Mkdir(dir, 0o755))
	var set *lanes.Set
	if m != nil {
		set, _, err = chunks.Load(ctx, b, a, snapKey, m, dir, chunks.Options{})
	} else {
		set, err = lanes.LoadSnapshot(ctx, dir, sr, snapKey)
	}
	rc.Close()
	require.NoError(t, err)
	t.Cleanup(func() { set.Close() })
	out := replayed{}
	for o, err := range bucket.All(ctx, b, a.LogSessionPrefix(epoch)) {
		require.NoError(t, err)
		k, err := frames.ParseKey(o.Key)
		require.NoError(t, err)
		if k.Seq <= set.Seq() {
			continue
		}
		rc, _, err := b.Get(ctx, o.Key)
		require.NoError(t, err)
		br, err := frames.NewBatchReader(rc, o.Key, frames.Limits{})
		if err == nil {
			err = set.ReplayBatch(ctx, br, o.Key)
		}
		rc.Close()
		require.NoError(t, err, "replaying %s", o.Key)
		out.Batches++
	}
	require.NoError(t, set.VerifyFiles(ctx))
	require.NoError(t, set.Sync())
	l, ok := set.Lane(lanes.MainLane)
	if !ok {
		t.Fatal("replayed session has no main lane")
	}
	out.Path, out.Seq, out.Stats = l.Path, set.Seq(), set.Stats()
	return out
}

// checkpointed returns the database's bytes after a TRUNCATE checkpoint.
func checkpointed(t testing.TB, c *sqlite3.Conn, path string) []byte {
	t.Helper()
	_, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(t, err)
	return dbtest.FileBytes(t, path)
}

// heldGate wraps b in a gate that holds every batch upload (log keys)
// until Release, to make commits pile up deterministically.
func heldGate(b bucket.Bucket) *buckettest.Gate {
	g := buckettest.NewGate(b, isLogKey)
	g.Hold()
	return g
}

// isLogKey matches the keys of batches.
func isLogKey(key string) bool {
	k, err := frames.ParseKey(key)
	return err == nil && k.Kind == frames.KeyLog
}

// waitInflight waits until the uploader has taken a batch ending at seq.
func waitInflight(t testing.TB, r *replicator, seq frames.Seq) {
	t.Helper()
	for range 5000 {
		r.mu.Lock()
		b := r.inflight
		r.mu.Unlock()
		if b != nil && b.last == seq {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the uploader never took the batch ending at %d", seq)
}

// errIs reports errors.Is with a readable failure.
func errIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got %v, want %v", err, target)
	}
}
