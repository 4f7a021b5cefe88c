package restore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/require"
)

// TestRestoreTargets replicates a randomized workload over two sessions,
// keeping the database's bytes at every durable point, and restores the
// latest state, every point of the current session by frame and by time,
// and frames in between: each restore is byte-identical to the database
// at the point it reaches.
func TestRestoreTargets(t *testing.T) {
	for _, be := range buckettest.Backends() {
		for _, pageSize := range []int{1024, 4096} {
			t.Run(fmt.Sprintf("%s/page=%d", be.Name, pageSize), func(t *testing.T) {
				b := be.New(t)
				w := newWorkload(t, b, "targets", uint64(pageSize), pageSize)
				for range scaled(6) {
					w.durableOps(8)
				}
				first := len(w.points)
				w.newSession(2)
				for i := range scaled(9) {
					w.durableOps(1 + i%4*3)
				}
				session1, session2 := w.points[:first], w.points[first:]
				last := w.points[len(w.points)-1]

				res, got := restoreTo(t, b, w.actor, restore.Latest())
				dbtest.SameBytes(t, "latest", got, last.data)
				if res.Epoch != 2 || res.Seq != last.seq {
					t.Fatalf("latest: session %d frame %d, want session 2 frame %d", res.Epoch, res.Seq, last.seq)
				}

				for _, p := range session2 {
					res, got := restoreTo(t, b, w.actor, restore.ToSeq(p.seq))
					dbtest.SameBytes(t, fmt.Sprintf("frame %d", p.seq), got, p.data)
					if res.Seq != p.seq {
						t.Fatalf("to frame %d reached %d", p.seq, res.Seq)
					}
					// The session's first point included: its first snapshot
					// carries the commit time of the state it starts from.
					res, got = restoreTo(t, b, w.actor, restore.AtTime(p.time))
					dbtest.SameBytes(t, fmt.Sprintf("time of frame %d", p.seq), got, p.data)
					if res.Seq != p.seq || res.CommitTime.After(p.time) || res.CommitTime.IsZero() {
						t.Fatalf("at %v reached frame %d committed %v, want frame %d", p.time, res.Seq, res.CommitTime, p.seq)
					}
				}

				// Between two points the restore stops at a frame boundary
				// at or before the target, never past it.
				for i := 1; i < len(session2); i++ {
					lo, hi := session2[i-1], session2[i]
					if hi.seq-lo.seq < 2 {
						continue
					}
					target := lo.seq + (hi.seq-lo.seq)/2
					res, _ := restoreTo(t, b, w.actor, restore.ToSeq(target))
					if res.Seq < lo.seq || res.Seq > target {
						t.Fatalf("to frame %d between %d and %d reached %d", target, lo.seq, hi.seq, res.Seq)
					}
				}

				// Targets before session 2's oldest state are in session 1,
				// which session 2 continued from its last point: the lineage
				// reaches them, by frame and by time.
				for _, p := range session1 {
					want := frames.Epoch(1)
					if p.seq == session2[0].seq {
						want = 2 // session 2's first snapshot holds that state
					}
					res, got := restoreTo(t, b, w.actor, restore.ToSeq(p.seq))
					dbtest.SameBytes(t, fmt.Sprintf("frame %d of session 1", p.seq), got, p.data)
					if res.Seq != p.seq || res.Epoch != want {
						t.Fatalf("to frame %d of session 1: session %d frame %d, want session %d", p.seq, res.Epoch, res.Seq, want)
					}
					if p.seq == 0 {
						continue // the new actor's first state: not placed in time (TestRestoreTargetOutOfRange)
					}
					res, got = restoreTo(t, b, w.actor, restore.AtTime(p.time))
					dbtest.SameBytes(t, fmt.Sprintf("time of frame %d of session 1", p.seq), got, p.data)
					if res.Seq != p.seq || res.Epoch != want {
						t.Fatalf("at the time of frame %d of session 1: session %d frame %d, want session %d", p.seq, res.Epoch, res.Seq, want)
					}
				}

				// Without session 1 in the bucket, its frames are before the
				// oldest state anything holds.
				inv, err := restore.Take(t.Context(), b, w.actor)
				require.NoError(t, err)
				s1, _ := inv.Session(1)
				for _, o := range append(s1.Snapshots, s1.Batches...) {
					require.NoError(t, b.Delete(t.Context(), o.Key))
				}
				for _, p := range session1[:len(session1)-1] {
					_, err := restore.Restore(t.Context(), b, w.actor, filepath.Join(t.TempDir(), "x.db"),
						restore.Options{Target: restore.ToSeq(p.seq)})
					var te *restore.TargetError
					if !errors.As(err, &te) || !errors.Is(err, restore.ErrTargetOutOfRange) ||
						te.Epoch != 2 || te.FirstSeq != session2[0].seq || te.LastSeq != last.seq {
						t.Fatalf("frame %d of session 1: got %v, want a *TargetError: session 2 holds %d..%d",
							p.seq, err, session2[0].seq, last.seq)
					}
				}
			})
		}
	}
}

// TestRestoreTimeInsideMergedFrame: commits merged into one frame can only
// be restored together. A time between two of them restores the state
// before the merged frame.
func TestRestoreTimeInsideMergedFrame(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			g := buckettest.NewGate(be.New(t), isLogKey)
			w := newWorkload(t, g, "merged", 3, 4096)
			w.durableOps(5)
			g.Hold()
			w.exec(0, "INSERT INTO t(a,b) VALUES(1, randomblob(100))") // c0: the uploader takes it and waits
			<-g.Waiting()
			before := w.snapshotNow()
			w.exec(0, "INSERT INTO t(a,b) VALUES(2, randomblob(100))") // c1, c2, c3 pile up: one frame
			w.exec(1, "INSERT INTO t(a,b) VALUES(3, randomblob(100))")
			between := time.Now()
			for !time.Now().After(between) {
			}
			w.exec(0, "INSERT INTO t(a,b) VALUES(4, randomblob(100))")
			g.Release()
			end := w.durable()

			res, got := restoreTo(t, g, w.actor, restore.AtTime(between))
			require.Equal(t, end.seq-3, res.Seq, "at a time inside the merged frame %d..%d: reached", end.seq-2, end.seq)
			dbtest.SameBytes(t, "state before the merged frame", got, before)
			res, got = restoreTo(t, g, w.actor, restore.ToSeq(end.seq-1))
			require.Equal(t, end.seq-3, res.Seq, "to frame %d inside the merged frame: reached", end.seq-1)
			dbtest.SameBytes(t, "state before the merged frame", got, before)
			_, got = restoreTo(t, g, w.actor, restore.AtTime(end.time))
			dbtest.SameBytes(t, "state after the merged frame", got, end.data)
		})
	}
}

// TestRestoreLeavesDestinationOnFailure: a restore that fails (here a gap)
// leaves an existing destination as it was and nothing beside it; one that
// succeeds replaces it whole.
func TestRestoreLeavesDestinationOnFailure(t *testing.T) {
	b := buckettest.Dir(t)
	w := newWorkload(t, b, "dest", 4, 1024)
	for range 3 {
		w.durableOps(4)
	}
	w.closeDB()
	dir := t.TempDir()
	dest := filepath.Join(dir, "db.sqlite")
	old := []byte("the previous database, which must survive a failed restore")
	require.NoError(t, os.WriteFile(dest, old, 0o644))
	batches := buckettest.Keys(t, b, w.actor.LogPrefix())
	if len(batches) < 3 {
		t.Fatalf("want 3 batches or more, have %d", len(batches))
	}
	hidden := hide(t, b, batches[1])
	_, err := restore.Restore(t.Context(), b, w.actor, dest, restore.Options{})
	require.ErrorIs(t, err, errGap)
	if got, _ := os.ReadFile(dest); string(got) != string(old) {
		t.Fatalf("the destination changed: %q", got)
	}
	require.Len(t, dirEntries(t, dir), 1, "left behind")
	hidden()
	res, err := restore.Restore(t.Context(), b, w.actor, dest, restore.Options{})
	require.NoError(t, err)
	got, _ := os.ReadFile(dest)
	dbtest.SameBytes(t, "restored over the old file", got, w.points[len(w.points)-1].data)
	require.Len(t, dirEntries(t, dir), 1, "left behind")
	require.Equal(t, dest, res.Path, "result path")

	// A destination with a WAL beside it is refused, and left alone.
	require.NoError(t, os.WriteFile(dest+"-wal", []byte("a WAL SQLite would apply"), 0o644))
	_, err = restore.Restore(t.Context(), b, w.actor, dest, restore.Options{})
	require.ErrorIs(t, err, restore.ErrDestination, "with a -wal beside the destination")
	got2, _ := os.ReadFile(dest)
	dbtest.SameBytes(t, "the refused destination, unchanged", got2, got)
}

// TestRestoreNamespace restores every actor of a namespace in parallel.
func TestRestoreNamespace(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			var ws []*workload
			for i := range 3 {
				w := newWorkload(t, b, "ns", uint64(10+i), 1024)
				w.durableOps(4 + 3*i)
				ws = append(ws, w)
			}
			other := newWorkload(t, b, "another-namespace", 20, 1024)
			other.durableOps(2)

			dir := filepath.Join(t.TempDir(), "out")
			results, err := restore.RestoreNamespace(t.Context(), b, ws[0].actor.Namespace, dir, restore.Options{Actors: 3})
			require.NoError(t, err)
			if len(results) != len(ws) {
				t.Fatalf("%d results for %d actors", len(results), len(ws))
			}
			for _, w := range ws {
				got, err := os.ReadFile(filepath.Join(dir, w.actor.Actor+".db"))
				require.NoError(t, err)
				dbtest.SameBytes(t, w.actor.Actor, got, w.points[len(w.points)-1].data)
			}
			require.Len(t, dirEntries(t, dir), len(ws), "files in the output directory")
		})
	}
}

// TestRestoreBudgets restores with a read-ahead budget of one byte (every
// object must wait to be the head, which is never refused) and with one
// batch at a time, and with a cancelled context, which leaves nothing.
func TestRestoreBudgets(t *testing.T) {
	b := buckettest.Dir(t)
	w := newWorkload(t, b, "budget", 9, 1024)
	for range 6 {
		w.durableOps(3)
	}
	w.closeDB()
	want := w.points[len(w.points)-1]
	for _, opts := range []restore.Options{
		{MaxInflightBytes: 1, Parallelism: 8},
		{Parallelism: 1},
		{MaxInflightBytes: 1, Parallelism: 1},
	} {
		dest := filepath.Join(t.TempDir(), "r.db")
		res, err := restore.Restore(t.Context(), b, w.actor, dest, opts)
		require.NoError(t, err, "%+v", opts)
		got, _ := os.ReadFile(dest)
		dbtest.SameBytes(t, fmt.Sprintf("%+v", opts), got, want.data)
		require.Equal(t, want.seq, res.Seq, "%+v: reached", opts)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	_, err := restore.Restore(ctx, b, w.actor, filepath.Join(dir, "r.db"), restore.Options{})
	require.ErrorIs(t, err, context.Canceled, "cancelled")
	require.Len(t, dirEntries(t, dir), 0, "left behind")
}

// TestRestoreTargetOutOfRange: a target the session cannot reach is a
// *TargetError naming the range it can, never another state restored in
// its place, and OrNearest restores the nearest state instead, saying so.
// A time after the newest commit is in range: the newest state.
func TestRestoreTargetOutOfRange(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			before := time.Now() // before the actor exists
			for !time.Now().After(before) {
			}
			w := newWorkload(t, b, "range", 11, 1024)
			for range 3 {
				w.durableOps(4)
			}
			session1 := w.points
			w.newSession(2)
			for range 3 {
				w.durableOps(4)
			}
			w.closeDB()
			session2 := w.points[len(session1):]
			first, last := session2[0], session2[len(session2)-1]
			// Session 1 is gone (as the tier pass leaves it): the range is
			// session 2's alone (TestRestoreAcrossSessions has both).
			inv, err := restore.Take(t.Context(), b, w.actor)
			require.NoError(t, err)
			s1, _ := inv.Session(1)
			for _, o := range append(s1.Snapshots, s1.Batches...) {
				require.NoError(t, b.Delete(t.Context(), o.Key))
			}

			outOfRange := func(target restore.Target) *restore.TargetError {
				t.Helper()
				dir := t.TempDir()
				_, err := restore.Restore(t.Context(), b, w.actor, filepath.Join(dir, "r.db"), restore.Options{Target: target})
				var te *restore.TargetError
				require.ErrorAs(t, err, &te, "%s", target)
				require.ErrorIs(t, err, restore.ErrTargetOutOfRange, "%s", target)
				if te.Epoch != 2 || te.FirstSeq != first.seq || te.LastSeq != last.seq {
					t.Fatalf("%s: %+v, want session 2 holding frames %d..%d", target, te, first.seq, last.seq)
				}
				require.Len(t, dirEntries(t, dir), 0, "%s: left behind", target)
				return te
			}
			nearest := func(target restore.Target, want point) {
				t.Helper()
				res, got := restoreTo(t, b, w.actor, target.OrNearest())
				dbtest.SameBytes(t, target.String()+" or the nearest", got, want.data)
				if res.Seq != want.seq || res.OutOfRange == nil || res.OutOfRange.Target.Nearest() != true {
					t.Fatalf("%s or the nearest: frame %d, out of range %+v; want frame %d, out of range set", target, res.Seq, res.OutOfRange, want.seq)
				}
			}

			// Past the newest frame.
			outOfRange(restore.ToSeq(last.seq + 1))
			nearest(restore.ToSeq(last.seq+1), last)
			// Before the oldest snapshot (in the superseded session).
			outOfRange(restore.ToSeq(first.seq - 1))
			nearest(restore.ToSeq(first.seq-1), first)
			// Before the commit time of session 2's first snapshot: the
			// state of the last point of session 1, committed in session 1.
			te := outOfRange(restore.AtTime(session1[0].time))
			if te.EarliestSeq != first.seq || !te.EarliestTime.After(session1[0].time) || te.EarliestTime.After(first.time) {
				t.Fatalf("before the oldest snapshot: earliest frame %d at %v, want frame %d committed before %v", te.EarliestSeq, te.EarliestTime, first.seq, first.time)
			}
			nearest(restore.AtTime(session1[0].time), first)

			// In range: no OutOfRange, whether or not OrNearest was asked.
			for _, target := range []restore.Target{restore.ToSeq(last.seq), restore.ToSeq(first.seq),
				restore.AtTime(first.time), restore.AtTime(time.Now().Add(time.Hour))} {
				for _, tg := range []restore.Target{target, target.OrNearest()} {
					res, _ := restoreTo(t, b, w.actor, tg)
					if res.OutOfRange != nil {
						t.Fatalf("%s: out of range %v", tg, res.OutOfRange)
					}
				}
			}
			res, got := restoreTo(t, b, w.actor, restore.AtTime(time.Now().Add(time.Hour)))
			dbtest.SameBytes(t, "an hour from now", got, last.data)
			require.Equal(t, last.seq, res.Seq, "an hour from now: frame")

			// A new actor's first snapshot (frame 0) records no commit
			// time: a time before its first commit is out of range, with
			// the first frame after it as the earliest state in time.
			a1 := newWorkload(t, b, "range-fresh", 12, 1024)
			p1 := a1.durableOps(4)
			a1.closeDB()
			_, err = restore.Restore(t.Context(), b, a1.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{Target: restore.AtTime(before)})
			te = nil
			if !errors.As(err, &te) || te.Epoch != 1 || te.FirstSeq != 0 || te.LastSeq != p1.seq ||
				te.EarliestSeq == 0 || te.EarliestSeq > p1.seq || !te.EarliestTime.After(before) {
				t.Fatalf("before the first commit: got %v (%+v), want a *TargetError with the first frame as the earliest", err, te)
			}
			res, got = restoreTo(t, b, a1.actor, restore.AtTime(before).OrNearest())
			dbtest.SameBytes(t, "before the first commit, or the nearest", got, a1.points[0].data)
			if res.Seq != 0 || res.OutOfRange == nil {
				t.Fatalf("before the first commit, or the nearest: frame %d, out of range %v", res.Seq, res.OutOfRange)
			}
		})
	}
}
