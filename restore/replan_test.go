package restore_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compactTo builds what compaction would store: a snapshot of epoch's
// session at seq, planned and replayed from the bucket as compaction does.
func compactTo(t testing.TB, b bucket.Bucket, a frames.Actor, epoch frames.Epoch, seq frames.Seq) (string, []byte) {
	t.Helper()
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	plan, err := restore.PlanSession(t.Context(), b, inv, epoch, restore.ToSeq(seq), frames.Limits{})
	require.NoError(t, err)
	rep, err := restore.Replay(t.Context(), b, plan, t.TempDir(), restore.Options{})
	require.NoError(t, err)
	defer rep.Close()
	require.Equal(t, seq, rep.Seq, "replayed")
	var buf bytes.Buffer
	hdr, err := rep.Set.WriteSnapshot(t.Context(), &buf, epoch, frames.WriteOptions{})
	require.NoError(t, err)
	return a.SnapshotKey(epoch, hdr.Seq), buf.Bytes()
}

// racingCompaction stores a snapshot and deletes everything it covers the
// first time a covered batch is fetched, as a compaction running beside
// the restore would: the restore must plan again and succeed.
type racingCompaction struct {
	bucket.Bucket
	a        frames.Actor
	snapKey  string
	snapshot []byte
	seq      frames.Seq
	once     sync.Once
	fired    atomic.Bool
	err      error // of the compaction, returned by the Get that ran it
}

func (c *racingCompaction) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if k, err := frames.ParseKey(key); err == nil && k.Kind == frames.KeyLog && k.Seq <= c.seq {
		c.once.Do(func() { c.err = c.compact(ctx) })
		if c.err != nil {
			return nil, bucket.Info{}, c.err
		}
	}
	return c.Bucket.Get(ctx, key)
}

func (c *racingCompaction) compact(ctx context.Context) error {
	if _, err := c.Bucket.Put(ctx, c.snapKey, bytes.NewReader(c.snapshot), int64(len(c.snapshot)), bucket.Condition{}); err != nil {
		return err
	}
	var covered []string
	for o, err := range bucket.All(ctx, c.Bucket, c.a.Prefix()) {
		if err != nil {
			return err
		}
		if k, err := frames.ParseKey(o.Key); err == nil && k.Kind != frames.KeyOwn && k.Seq <= c.seq && o.Key != c.snapKey {
			covered = append(covered, o.Key)
		}
	}
	if err := c.Bucket.DeleteMany(ctx, covered); err != nil {
		return err
	}
	c.fired.Store(true)
	return nil
}

// TestRestoreReplansWhenCompactionRaces: batches planned for are deleted
// by a compaction after the plan; the restore plans again from a fresh
// listing and returns the same database.
func TestRestoreReplansWhenCompactionRaces(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			w := newWorkload(t, b, "replan", 5, 1024)
			for range 5 {
				w.durableOps(4)
			}
			w.closeDB()
			mid := w.points[3]
			snapKey, snap := compactTo(t, b, w.actor, 1, mid.seq)
			c := &racingCompaction{Bucket: b, a: w.actor, snapKey: snapKey, snapshot: snap, seq: mid.seq}
			dest := filepath.Join(t.TempDir(), "r.db")
			res, err := restore.Restore(t.Context(), c, w.actor, dest, restore.Options{})
			require.NoError(t, err)
			if !c.fired.Load() || res.Replans != 1 || res.Snapshot != snapKey {
				t.Fatalf("compaction fired %v, replans %d, snapshot %s (want %s)", c.fired.Load(), res.Replans, res.Snapshot, snapKey)
			}
			got, err := os.ReadFile(dest)
			require.NoError(t, err)
			dbtest.SameBytes(t, "restored after re-planning", got, w.points[len(w.points)-1].data)
		})
	}
}

// vanishing answers 404 for one object forever.
type vanishing struct {
	bucket.Bucket
	key  string
	gets atomic.Int64
}

func (v *vanishing) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if key == v.key {
		v.gets.Add(1)
		return nil, bucket.Info{}, &bucket.Error{Op: "get", Key: key, Err: bucket.ErrNotFound}
	}
	return v.Bucket.Get(ctx, key)
}

// TestRestoreGivesUpReplanning: an object that keeps vanishing makes the
// restore give up after MaxReplans plans, with an error matching
// ErrReplans and the 404.
func TestRestoreGivesUpReplanning(t *testing.T) {
	b := buckettest.Dir(t)
	w := newWorkload(t, b, "vanish", 6, 1024)
	w.durableOps(4)
	w.closeDB()
	batches := buckettest.Keys(t, b, w.actor.LogPrefix())
	v := &vanishing{Bucket: b, key: batches[0]}
	_, err := restore.Restore(t.Context(), v, w.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{MaxReplans: 3})
	require.ErrorIs(t, err, restore.ErrReplans)
	require.ErrorIs(t, err, bucket.ErrNotFound)
	if n := v.gets.Load(); n != 4 {
		t.Fatalf("the vanishing batch was asked for %d times, want 4 (1 plan + 3 re-plans)", n)
	}
}

// TestRestoreSkipsBatchCoveredLater: a batch that starts past the frame
// reached is skipped when a later, wider batch covers it (a retried upload
// that merged more commits), and the result is the same database.
func TestRestoreSkipsBatchCoveredLater(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			w := newWorkload(t, b, "covered", 7, 1024)
			// Inserts only: the database never shrinks, so merging
			// batches is a union of their pages.
			for i := range 4 {
				w.exec(i%2, "INSERT INTO t(a,b) SELECT value, randomblob(300) FROM generate_series(1,5)")
				w.durable()
			}
			w.closeDB()
			batches := buckettest.Keys(t, b, w.actor.LogPrefix())
			n := len(batches)
			if n < 4 {
				t.Fatalf("want 4 batches or more, have %d", n)
			}
			// ..., b1, b2, b3, b4 become ..., b1, b3, M(b2..b4): b3 starts
			// past b1's end, and M covers it.
			var merged []frames.Frame
			for _, k := range batches[n-3:] {
				data, _, err := bucket.ReadAll(t.Context(), b, k, 1<<30)
				require.NoError(t, err)
				_, fs, err := frames.ReadBatch(bytes.NewReader(data), k, frames.Limits{})
				require.NoError(t, err)
				merged = append(merged, fs...)
			}
			m := mergeFrames(merged)
			var buf bytes.Buffer
			_, err := frames.WriteBatch(&buf, 1, []frames.Frame{m}, frames.WriteOptions{})
			require.NoError(t, err)
			put(t, b, w.actor.LogKey(1, m.LastSeq), buf.Bytes())
			require.NoError(t, b.Delete(t.Context(), batches[n-3]))

			res, got := restoreTo(t, b, w.actor, restore.Latest())
			dbtest.SameBytes(t, "restored through the wider batch", got, w.points[len(w.points)-1].data)
			if res.BatchesApplied != n-2 || res.BatchesSkipped != 1 {
				t.Fatalf("applied %d, skipped %d; want %d and 1", res.BatchesApplied, res.BatchesSkipped, n-2)
			}
			rep, err := restore.Verify(t.Context(), b, w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
			require.NoError(t, err)
			if rep.Damaged() {
				t.Fatalf("a covered batch reported as damage: %v", rep.Problems)
			}
		})
	}
}

// mergeFrames merges consecutive frames.KindSQLitePages frames of a
// growing database into one, as the replicator merges a run of commits.
func mergeFrames(fs []frames.Frame) frames.Frame {
	m := fs[0]
	pages := map[uint32][]byte{}
	for _, f := range fs {
		for _, p := range f.SQLite.Pages {
			pages[p.Number] = p.Data
		}
	}
	last := fs[len(fs)-1]
	m.LastSeq, m.CommitTime = last.LastSeq, last.CommitTime
	m.SQLite.DatabasePages, m.SQLite.After = last.SQLite.DatabasePages, last.SQLite.After
	m.SQLite.Pages = nil
	for n, d := range pages {
		m.SQLite.Pages = append(m.SQLite.Pages, frames.Page{Number: n, Data: d})
	}
	slices.SortFunc(m.SQLite.Pages, func(x, y frames.Page) int { return int(x.Number) - int(y.Number) })
	return m
}

// TestReplayRefusesBadPlan: a hand-made plan mixing sessions or out of
// order is refused before anything is read.
func TestReplayRefusesBadPlan(t *testing.T) {
	b := buckettest.Dir(t)
	w := newWorkload(t, b, "badplan", 11, 1024)
	w.durable() // the tables: one batch or more
	w.exec(0, "INSERT INTO t(a,b) VALUES(1, x'01')")
	w.durable() // and one more
	w.closeDB()
	inv, err := restore.Take(t.Context(), b, w.actor)
	require.NoError(t, err)
	good, err := restore.PlanSession(t.Context(), b, inv, 1, restore.Latest(), frames.Limits{})
	require.NoError(t, err)
	if len(good.Batches) < 2 {
		t.Fatalf("want 2 batches or more, have %d", len(good.Batches))
	}
	other := good.Batches[0]
	other.Epoch = 2
	for name, p := range map[string]restore.Plan{
		"reversed":      {Actor: good.Actor, Epoch: 1, Snapshot: good.Snapshot, Batches: []restore.Object{good.Batches[1], good.Batches[0]}},
		"other session": {Actor: good.Actor, Epoch: 1, Snapshot: good.Snapshot, Batches: []restore.Object{other}},
		"no snapshot":   {Actor: good.Actor, Epoch: 1, Batches: good.Batches},
	} {
		dir := t.TempDir()
		_, err := restore.Replay(t.Context(), b, p, dir, restore.Options{})
		assert.ErrorIs(t, err, frames.ErrInvalid, "%s", name)
		assert.Len(t, dirEntries(t, dir), 0, "%s: left behind", name)
	}
	rep, err := restore.Replay(t.Context(), b, good, t.TempDir(), restore.Options{})
	require.NoError(t, err)
	rep.Close()
}
