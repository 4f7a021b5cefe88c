package restore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
)

// TestRestoreAcrossSessions: an actor woken three times through framectl.Open
// (two wakes that find their local copy current, one from an empty
// directory that restores first), compacted with an hour of retention
// after every session. Every durable point of every session, superseded
// ones included, restores by sequence number and by time byte for byte to
// a copy of the database taken at that point, from the session that wrote
// it: the lineage leads there.
func TestRestoreAcrossSessions(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			w := newWorkload(t, b, "lineage", 21, 1024)
			opts := compact.Options{ScratchDir: t.TempDir(), Retention: time.Hour, Force: true}
			epochOf := map[frames.Seq]frames.Epoch{}
			session := func(epoch frames.Epoch) {
				t.Helper()
				// At least two durable points per session, also under -race:
				// a session's last point is where its successor starts, so
				// only the ones before it belong to the session alone.
				for range max(2, scaled(3)) {
					p := w.durableOps(6)
					if _, ok := epochOf[p.seq]; !ok {
						epochOf[p.seq] = epoch
					}
				}
				_, err := compact.Actor(t.Context(), b, w.actor, opts)
				require.NoError(t, err, "compacting session %d", epoch)
			}
			epochOf[0] = 1
			session(1)
			w.newSession(2)
			session(2)
			w.closeDB()
			w.cfg.Dir = t.TempDir() // the third session restores from the bucket
			w.newSession(3)
			session(3)
			w.newSession(4)
			session(4)

			for _, p := range w.points {
				res, got := restoreTo(t, b, w.actor, restore.ToSeq(p.seq))
				dbtest.SameBytes(t, fmt.Sprintf("seq %d", p.seq), got, p.data)
				if res.Seq != p.seq || res.Epoch < epochOf[p.seq] {
					t.Fatalf("to seq %d: session %d seq %d; want seq %d from session %d or a later one holding it", p.seq, res.Epoch, res.Seq, p.seq, epochOf[p.seq])
				}
				if p.seq == 0 {
					continue // the new actor's first state is not placed in time
				}
				res, got = restoreTo(t, b, w.actor, restore.AtTime(p.time))
				dbtest.SameBytes(t, fmt.Sprintf("time of seq %d", p.seq), got, p.data)
				if res.Seq != p.seq {
					t.Fatalf("at the time of seq %d: seq %d", p.seq, res.Seq)
				}
			}
			// The oldest points are in session 1, three sessions back.
			res, _ := restoreTo(t, b, w.actor, restore.ToSeq(w.points[1].seq))
			require.Equal(t, frames.Epoch(1), res.Epoch, "session of the oldest points")
		})
	}
}

// TestRestoreNeverShowsZombie: session 2 takes over from session 1 while
// session 1's owner goes on writing (a zombie: nothing fences it here). Its
// late batches stay in session 1, past the point session 2 continued from,
// under sequence numbers session 2 uses too. No restore, to any sequence
// number or time, ever returns a state the zombie wrote: points up to the
// takeover restore from session 1, later ones from session 2, and a
// sequence number only the zombie reached is out of range.
func TestRestoreNeverShowsZombie(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			z := newWorkload(t, b, "zombie", 22, 1024)
			for range 3 {
				z.durableOps(6)
			}
			history := z.points // session 1 up to the takeover

			w := &workload{t: t, b: b, rng: z.rng, pageSize: z.pageSize, cfg: z.cfg, actor: z.actor}
			w.cfg.Epoch, w.cfg.Dir = 2, t.TempDir()
			w.open() // restores session 1: the takeover
			start := w.points[0]
			require.Equal(t, history[len(history)-1].seq, start.seq, "session 2 continues from session 1's last point")

			var late []point
			for range 4 { // the zombie's commits, past the takeover
				z.ops(8)
				late = append(late, z.durable())
			}
			for range 2 {
				w.durableOps(3)
			}
			t.Cleanup(func() {
				// The zombie cannot release a record of a newer epoch.
				for _, c := range z.conns {
					c.Close()
				}
				z.conns = nil
				z.db.Close(context.Background())
				z.db = nil
			})
			newest := w.points[len(w.points)-1]
			require.Greater(t, late[len(late)-1].seq, newest.seq, "the zombie reached past session 2")
			inv, err := restore.Take(t.Context(), b, z.actor)
			require.NoError(t, err)
			s1, _ := inv.Session(1)
			require.Greater(t, s1.LastSeq(), start.seq, "the zombie's late batches are in session 1")

			zombie := map[string]bool{}
			for _, p := range late {
				zombie[string(p.data)] = true
			}
			// at restores target and checks the result is the newest point
			// of the history at or before it.
			check := func(target restore.Target, want point) {
				t.Helper()
				res, got := restoreTo(t, b, z.actor, target)
				if zombie[string(got)] {
					t.Fatalf("%s restored a state the zombie wrote (seq %d, session %d)", target, res.Seq, res.Epoch)
				}
				dbtest.SameBytes(t, target.String(), got, want.data)
				require.Equal(t, want.seq, res.Seq, "%s", target)
			}
			for _, p := range slices.Concat(history, w.points) {
				check(restore.ToSeq(p.seq), p)
				if p.seq != 0 { // the new actor's first state is not placed in time
					check(restore.AtTime(p.time), p)
				}
			}
			for _, p := range late {
				if p.seq > newest.seq {
					_, err := restore.Restore(t.Context(), b, z.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{Target: restore.ToSeq(p.seq)})
					var te *restore.TargetError
					if !errors.As(err, &te) || te.Epoch != 2 || te.LastSeq != newest.seq {
						t.Fatalf("to seq %d, which only the zombie reached: %v; want out of range of session 2 (to %d)", p.seq, err, newest.seq)
					}
				} else {
					// The history at that seq is session 2's.
					res, got := restoreTo(t, b, z.actor, restore.ToSeq(p.seq))
					if zombie[string(got)] || res.Epoch != 2 || res.Seq > p.seq {
						t.Fatalf("to seq %d, which the zombie and session 2 both reached: session %d seq %d (the zombie's state: %v)",
							p.seq, res.Epoch, res.Seq, zombie[string(got)])
					}
				}
				// At the time of a zombie commit, the history was session
				// 2's first state: it had continued and not yet committed.
				check(restore.AtTime(p.time), start)
			}
		})
	}
}
