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
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
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
					w.ops(8)
					w.durable()
				}
				first := len(w.points)
				w.newSession(2)
				for i := range scaled(9) {
					w.ops(1 + i%4*3)
					w.durable()
				}
				session1, session2 := w.points[:first], w.points[first:]
				last := w.points[len(w.points)-1]

				res, got := restoreTo(t, b, w.actor, restore.Latest())
				dbtest.SameBytes(t, "latest", got, last.data)
				if res.Session != 2 || res.Frame != last.frame {
					t.Fatalf("latest: session %d frame %d, want session 2 frame %d", res.Session, res.Frame, last.frame)
				}

				for _, p := range session2 {
					res, got := restoreTo(t, b, w.actor, restore.ToFrame(p.frame))
					dbtest.SameBytes(t, fmt.Sprintf("frame %d", p.frame), got, p.data)
					if res.Frame != p.frame {
						t.Fatalf("to frame %d reached %d", p.frame, res.Frame)
					}
					// The session's first point included: its first snapshot
					// carries the commit time of the state it starts from.
					res, got = restoreTo(t, b, w.actor, restore.AtTime(p.time))
					dbtest.SameBytes(t, fmt.Sprintf("time of frame %d", p.frame), got, p.data)
					if res.Frame != p.frame || res.CommitTime.After(p.time) || res.CommitTime.IsZero() {
						t.Fatalf("at %v reached frame %d committed %v, want frame %d", p.time, res.Frame, res.CommitTime, p.frame)
					}
				}

				// Between two points the restore stops at a frame boundary
				// at or before the target, never past it.
				for i := 1; i < len(session2); i++ {
					lo, hi := session2[i-1], session2[i]
					if hi.frame-lo.frame < 2 {
						continue
					}
					target := lo.frame + (hi.frame-lo.frame)/2
					res, _ := restoreTo(t, b, w.actor, restore.ToFrame(target))
					if res.Frame < lo.frame || res.Frame > target {
						t.Fatalf("to frame %d between %d and %d reached %d", target, lo.frame, hi.frame, res.Frame)
					}
				}

				// Targets never reach into a superseded session: its frames
				// are before the current session's oldest snapshot.
				for _, p := range session1[:len(session1)-1] {
					_, err := restore.Restore(t.Context(), b, w.actor, filepath.Join(t.TempDir(), "x.db"),
						restore.Options{Target: restore.ToFrame(p.frame)})
					var te *restore.TargetError
					if !errors.As(err, &te) || !errors.Is(err, restore.ErrTargetOutOfRange) ||
						te.Session != 2 || te.First != session2[0].frame || te.Last != last.frame {
						t.Fatalf("frame %d of session 1: got %v, want a *TargetError: session 2 holds %d..%d",
							p.frame, err, session2[0].frame, last.frame)
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
			w.ops(5)
			w.durable()
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
			if res.Frame != end.frame-3 {
				t.Fatalf("at a time inside the merged frame %d..%d: reached %d, want %d", end.frame-2, end.frame, res.Frame, end.frame-3)
			}
			dbtest.SameBytes(t, "state before the merged frame", got, before)
			res, got = restoreTo(t, g, w.actor, restore.ToFrame(end.frame-1))
			if res.Frame != end.frame-3 {
				t.Fatalf("to frame %d inside the merged frame: reached %d, want %d", end.frame-1, res.Frame, end.frame-3)
			}
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
		w.ops(4)
		w.durable()
	}
	w.closeDB()
	dir := t.TempDir()
	dest := filepath.Join(dir, "db.sqlite")
	old := []byte("the previous database, which must survive a failed restore")
	if err := os.WriteFile(dest, old, 0o644); err != nil {
		t.Fatal(err)
	}
	batches := buckettest.Keys(t, b, w.actor.LogPrefix())
	if len(batches) < 3 {
		t.Fatalf("want 3 batches or more, have %d", len(batches))
	}
	hidden := hide(t, b, batches[1])
	_, err := restore.Restore(t.Context(), b, w.actor, dest, restore.Options{})
	if !errors.Is(err, errGap) {
		t.Fatalf("got %v, want a gap", err)
	}
	if got, _ := os.ReadFile(dest); string(got) != string(old) {
		t.Fatalf("the destination changed: %q", got)
	}
	if es := dirEntries(t, dir); len(es) != 1 {
		t.Fatalf("left behind: %v", es)
	}
	hidden()
	res, err := restore.Restore(t.Context(), b, w.actor, dest, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dest)
	dbtest.SameBytes(t, "restored over the old file", got, w.points[len(w.points)-1].data)
	if es := dirEntries(t, dir); len(es) != 1 {
		t.Fatalf("left behind: %v", es)
	}
	if res.Path != dest {
		t.Fatalf("result path %s, want %s", res.Path, dest)
	}

	// A destination with a WAL beside it is refused, and left alone.
	if err := os.WriteFile(dest+"-wal", []byte("a WAL SQLite would apply"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := restore.Restore(t.Context(), b, w.actor, dest, restore.Options{}); !errors.Is(err, restore.ErrDestination) {
		t.Fatalf("with a -wal beside the destination: got %v, want ErrDestination", err)
	}
	if got2, _ := os.ReadFile(dest); string(got2) != string(got) {
		t.Fatal("the destination changed")
	}
}

// TestRestoreNamespace restores every actor of a namespace in parallel.
func TestRestoreNamespace(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			var ws []*workload
			for i := range 3 {
				w := newWorkload(t, b, "ns", uint64(10+i), 1024)
				w.ops(4 + 3*i)
				w.durable()
				ws = append(ws, w)
			}
			other := newWorkload(t, b, "another-namespace", 20, 1024)
			other.ops(2)
			other.durable()

			dir := filepath.Join(t.TempDir(), "out")
			results, err := restore.RestoreNamespace(t.Context(), b, ws[0].actor.Namespace, dir, restore.Options{Actors: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != len(ws) {
				t.Fatalf("%d results for %d actors", len(results), len(ws))
			}
			for _, w := range ws {
				got, err := os.ReadFile(filepath.Join(dir, w.actor.Actor+".db"))
				if err != nil {
					t.Fatal(err)
				}
				dbtest.SameBytes(t, w.actor.Actor, got, w.points[len(w.points)-1].data)
			}
			if es := dirEntries(t, dir); len(es) != len(ws) {
				t.Fatalf("files in the output directory: %v", es)
			}
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
		w.ops(3)
		w.durable()
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
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		got, _ := os.ReadFile(dest)
		dbtest.SameBytes(t, fmt.Sprintf("%+v", opts), got, want.data)
		if res.Frame != want.frame {
			t.Fatalf("%+v: reached %d, want %d", opts, res.Frame, want.frame)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	if _, err := restore.Restore(ctx, b, w.actor, filepath.Join(dir, "r.db"), restore.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v", err)
	}
	if es := dirEntries(t, dir); len(es) != 0 {
		t.Fatalf("left behind: %v", es)
	}
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
				w.ops(4)
				w.durable()
			}
			session1 := w.points
			w.newSession(2)
			for range 3 {
				w.ops(4)
				w.durable()
			}
			w.closeDB()
			session2 := w.points[len(session1):]
			first, last := session2[0], session2[len(session2)-1]

			outOfRange := func(target restore.Target) *restore.TargetError {
				t.Helper()
				dir := t.TempDir()
				_, err := restore.Restore(t.Context(), b, w.actor, filepath.Join(dir, "r.db"), restore.Options{Target: target})
				var te *restore.TargetError
				if !errors.As(err, &te) || !errors.Is(err, restore.ErrTargetOutOfRange) {
					t.Fatalf("%s: got %v, want a *TargetError", target, err)
				}
				if te.Session != 2 || te.First != first.frame || te.Last != last.frame {
					t.Fatalf("%s: %+v, want session 2 holding frames %d..%d", target, te, first.frame, last.frame)
				}
				if es := dirEntries(t, dir); len(es) != 0 {
					t.Fatalf("%s: left behind %v", target, es)
				}
				return te
			}
			nearest := func(target restore.Target, want point) {
				t.Helper()
				res, got := restoreTo(t, b, w.actor, target.OrNearest())
				dbtest.SameBytes(t, target.String()+" or the nearest", got, want.data)
				if res.Frame != want.frame || res.OutOfRange == nil || res.OutOfRange.Target.Nearest() != true {
					t.Fatalf("%s or the nearest: frame %d, out of range %+v; want frame %d, out of range set", target, res.Frame, res.OutOfRange, want.frame)
				}
			}

			// Past the newest frame.
			outOfRange(restore.ToFrame(last.frame + 1))
			nearest(restore.ToFrame(last.frame+1), last)
			// Before the oldest snapshot (in the superseded session).
			outOfRange(restore.ToFrame(first.frame - 1))
			nearest(restore.ToFrame(first.frame-1), first)
			// Before the commit time of session 2's first snapshot: the
			// state of the last point of session 1, committed in session 1.
			te := outOfRange(restore.AtTime(session1[0].time))
			if te.EarliestFrame != first.frame || !te.EarliestTime.After(session1[0].time) || te.EarliestTime.After(first.time) {
				t.Fatalf("before the oldest snapshot: earliest frame %d at %v, want frame %d committed before %v", te.EarliestFrame, te.EarliestTime, first.frame, first.time)
			}
			nearest(restore.AtTime(session1[0].time), first)

			// In range: no OutOfRange, whether or not OrNearest was asked.
			for _, target := range []restore.Target{restore.ToFrame(last.frame), restore.ToFrame(first.frame),
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
			if res.Frame != last.frame {
				t.Fatalf("an hour from now: frame %d, want %d", res.Frame, last.frame)
			}

			// A new actor's first snapshot (frame 0) records no commit
			// time: a time before its first commit is out of range, with
			// the first frame after it as the earliest state in time.
			a1 := newWorkload(t, b, "range-fresh", 12, 1024)
			a1.ops(4)
			p1 := a1.durable()
			a1.closeDB()
			_, err := restore.Restore(t.Context(), b, a1.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{Target: restore.AtTime(before)})
			te = nil
			if !errors.As(err, &te) || te.Session != 1 || te.First != 0 || te.Last != p1.frame ||
				te.EarliestFrame == 0 || te.EarliestFrame > p1.frame || !te.EarliestTime.After(before) {
				t.Fatalf("before the first commit: got %v (%+v), want a *TargetError with the first frame as the earliest", err, te)
			}
			res, got = restoreTo(t, b, a1.actor, restore.AtTime(before).OrNearest())
			dbtest.SameBytes(t, "before the first commit, or the nearest", got, a1.points[0].data)
			if res.Frame != 0 || res.OutOfRange == nil {
				t.Fatalf("before the first commit, or the nearest: frame %d, out of range %v", res.Frame, res.OutOfRange)
			}
		})
	}
}
