package vfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
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
	db, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func replConn(t testing.TB, db *DB, params ...string) *sqlite3.Conn {
	t.Helper()
	c, err := db.conn(params...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// replayed is a session rebuilt from the bucket alone.
type replayed struct {
	Path    string // the rebuilt database file
	Seq     uint64 // last sequence applied
	Batches int
	Stats   lanes.Stats
}

// replaySession rebuilds what the bucket holds of one session: its newest
// snapshot, then every batch after it, through package lanes (which checks
// the checksum chain frame by frame), then a full checksum of the result.
func replaySession(t testing.TB, b bucket.Bucket, a frames.Actor, epoch uint64) replayed {
	t.Helper()
	ctx := t.Context()
	page, err := b.List(ctx, a.SnapshotSessionPrefix(epoch), "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) == 0 {
		t.Fatalf("no snapshot for session %d of %s", epoch, a.Prefix())
	}
	snapKey := page.Objects[0].Key
	rc, _, err := b.Get(ctx, snapKey)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := frames.NewSnapshotReader(rc, snapKey, frames.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "replay")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := lanes.LoadSnapshot(ctx, dir, sr, snapKey)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	out := replayed{}
	for o, err := range bucket.All(ctx, b, a.LogSessionPrefix(epoch)) {
		if err != nil {
			t.Fatal(err)
		}
		k, err := frames.ParseKey(o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if k.Frame <= set.Seq() {
			continue
		}
		rc, _, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		br, err := frames.NewBatchReader(rc, o.Key, frames.Limits{})
		if err == nil {
			err = set.ReplayBatch(ctx, br, o.Key)
		}
		rc.Close()
		if err != nil {
			t.Fatalf("replaying %s: %v", o.Key, err)
		}
		out.Batches++
	}
	if err := set.VerifyFiles(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.Sync(); err != nil {
		t.Fatal(err)
	}
	l, ok := set.Lane(lanes.MainLane)
	if !ok {
		t.Fatal("replayed session has no main lane")
	}
	out.Path, out.Seq, out.Stats = l.Path, set.Seq(), set.Stats()
	return out
}

// fileBytes reads a whole file.
func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkpointed returns the database's bytes after a TRUNCATE checkpoint.
func checkpointed(t testing.TB, c *sqlite3.Conn, path string) []byte {
	t.Helper()
	if _, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE); err != nil {
		t.Fatal(err)
	}
	return fileBytes(t, path)
}

// integrityOK opens a copy of path with plain SQLite and runs integrity_check.
func integrityOK(t testing.TB, path string) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "check.db")
	if err := os.WriteFile(cp, fileBytes(t, path), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := sqlite3.Open("file:" + cp + "?vfs=os")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := query1(t, c, "PRAGMA integrity_check"); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
}

func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		n := 0
		for n < min(len(got), len(want)) && got[n] == want[n] {
			n++
		}
		t.Fatalf("%s: %d bytes vs %d, first difference at byte %d (page %d of 4 KiB)", what, len(got), len(want), n, n/4096+1)
	}
}

// gateBucket holds every log upload while closed, to make commits pile up
// in one batch deterministically. It starts closed.
type gateBucket struct {
	bucket.Bucket
	mu   sync.Mutex
	gate chan struct{}
}

func newGate(b bucket.Bucket) *gateBucket { return &gateBucket{Bucket: b, gate: make(chan struct{})} }

func (g *gateBucket) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if k, err := frames.ParseKey(key); err == nil && k.Kind == frames.KeyLog {
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return bucket.Info{}, ctx.Err()
		}
	}
	return g.Bucket.Put(ctx, key, body, size, cond)
}

func (g *gateBucket) open() {
	g.mu.Lock()
	close(g.gate)
	g.mu.Unlock()
}

func (g *gateBucket) close() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

// waitInflight waits until the uploader has taken a batch ending at seq.
func waitInflight(t testing.TB, r *replicator, seq uint64) {
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

var _ = fmt.Sprint
