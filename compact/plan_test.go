package compact

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planInventory builds an inventory from a compact description: per
// session, snapshots and batches as seq@age (age before now).
type obj struct {
	seq frames.Seq
	age time.Duration // -1: no modification time
}

type sess struct {
	epoch              frames.Epoch
	snapshots, batches []obj
}

func planInventory(now time.Time, sessions ...sess) *restore.Inventory {
	a := frames.Actor{Namespace: frames.NamespaceID("", "plan"), Actor: frames.ActorKey([]byte{1, 2, 3})}
	inv := &restore.Inventory{Actor: a}
	mk := func(kind frames.KeyKind, epoch frames.Epoch, o obj) restore.Object {
		key := a.LogKey(epoch, o.seq)
		if kind == frames.KeySnapshot {
			key = a.SnapshotKey(epoch, o.seq)
		}
		var mt time.Time
		if o.age >= 0 {
			mt = now.Add(-o.age)
		}
		return restore.Object{Key: key, Kind: kind, Epoch: epoch, Seq: o.seq, Size: 100, ModTime: mt}
	}
	for _, s := range sessions { // newest first, as Take returns them
		rs := restore.Session{Epoch: s.epoch}
		for _, o := range s.snapshots {
			rs.Snapshots = append(rs.Snapshots, mk(frames.KeySnapshot, s.epoch, o))
		}
		for _, o := range s.batches {
			rs.Batches = append(rs.Batches, mk(frames.KeyLog, s.epoch, o))
		}
		inv.Sessions = append(inv.Sessions, rs)
	}
	return inv
}

// names turns keys back into "s<epoch>/<seq>" and "l<epoch>/<seq>".
func names(t *testing.T, keys []string) []string {
	var out []string
	for _, k := range keys {
		pk, err := frames.ParseKey(k)
		require.NoError(t, err)
		kind := "l"
		if pk.Kind == frames.KeySnapshot {
			kind = "s"
		}
		out = append(out, fmt.Sprintf("%s%d/%d", kind, pk.Epoch, pk.Seq))
	}
	slices.Sort(out)
	return out
}

// TestPlan covers the tier pass and retention as pure decisions over a
// listing: which keys a pass deletes, and how many covered ones it keeps.
func TestPlan(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const h = time.Hour
	old := func(f frames.Seq) obj { return obj{f, 10 * h} }
	young := func(f frames.Seq) obj { return obj{f, time.Minute} }

	// Session 5 is a claim in progress (no snapshot yet), 4 the current
	// one (compacted twice), 3 and 2 superseded, 3 with a zombie's batch
	// (frame 40) uploaded after the takeover.
	full := func(snap4 ...obj) *restore.Inventory {
		return planInventory(now,
			sess{epoch: 5, batches: []obj{old(60)}},
			sess{epoch: 4, snapshots: snap4, batches: []obj{old(32), young(35), young(50), young(55)}},
			sess{epoch: 3, snapshots: []obj{old(20)}, batches: []obj{old(25), old(30), young(40)}},
			sess{epoch: 2, snapshots: []obj{old(1), old(10)}, batches: []obj{old(5), old(10), old(20)}},
		)
	}
	for _, c := range []struct {
		name      string
		inv       *restore.Inventory
		current   frames.Epoch
		retention time.Duration
		lineage   *lineage
		deleted   []string
		retained  int
	}{
		{
			name: "no retention: covered in the current session, all older sessions", inv: full(old(30), young(50)), current: 4,
			deleted: []string{"l2/10", "l2/20", "l2/5", "l3/25", "l3/30", "l3/40", "l4/32", "l4/35", "l4/50", "s2/1", "s2/10", "s3/20", "s4/30"},
		},
		{
			name: "current session without a snapshot: nothing", inv: full(), current: 4,
			deleted: nil,
		},
		{
			name: "own.json names a session with nothing yet: nothing", inv: full(old(30), young(50)), current: 6,
			deleted: nil,
		},
		{
			name: "current is the oldest: newer sessions untouched", inv: full(old(30), young(50)), current: 2,
			deleted: []string{"l2/10", "l2/5", "s2/1"},
		},
		{
			name: "window: keep point is the current session's old snapshot", inv: full(old(30), young(50)), current: 4, retention: h,
			deleted:  []string{"l2/10", "l2/20", "l2/5", "l3/25", "l3/30", "l3/40", "s2/1", "s2/10", "s3/20"},
			retained: 4, // s4/30, l4/32, l4/35, l4/50
		},
		{
			name: "window: current session all young, keep point in the superseded one", inv: full(young(30), young(50)), current: 4, retention: h,
			deleted:  []string{"l2/10", "l2/20", "l2/5", "s2/1", "s2/10"},
			retained: 8,
		},
		{
			name: "window longer than everything: nothing", inv: full(old(30), young(50)), current: 4, retention: 100 * h,
			deleted:  nil,
			retained: 13,
		},
		{
			// Session 4 continued session 3 from 30, which continued
			// session 2 from 20: the zombie's batch 40 in session 3 is
			// past the point session 4 continued from.
			name: "window with the lineage: keep point in the superseded session, the zombie's batch goes", inv: full(young(30), young(50)), current: 4, retention: h,
			lineage:  &lineage{links: []link{{epoch: 4}, {epoch: 3, ceiling: 30, capped: true}, {epoch: 2, ceiling: 20, capped: true}}, complete: true},
			deleted:  []string{"l2/10", "l2/20", "l2/5", "l3/40", "s2/1", "s2/10"},
			retained: 7,
		},
		{
			// Session 4 continued session 2 directly (from 20): session 3
			// is no one's history.
			name: "window with the lineage: a session passed over goes", inv: full(young(30), young(50)), current: 4, retention: h,
			lineage:  &lineage{links: []link{{epoch: 4}, {epoch: 2, ceiling: 20, capped: true}}, complete: true},
			deleted:  []string{"l2/10", "l2/5", "l3/25", "l3/30", "l3/40", "s2/1", "s3/20"},
			retained: 6, // s2/10, l2/20, and session 4's
		},
		{
			name: "window with the lineage, nothing old enough: only what is no history goes", inv: full(young(30), young(50)), current: 4, retention: 100 * h,
			lineage:  &lineage{links: []link{{epoch: 4}, {epoch: 3, ceiling: 30, capped: true}}},
			deleted:  []string{"l3/40"},
			retained: 12,
		},
		{
			name: "no retention with the lineage: as without", inv: full(old(30), young(50)), current: 4,
			lineage: &lineage{links: []link{{epoch: 4}, {epoch: 3, ceiling: 30, capped: true}}, complete: true},
			deleted: []string{"l2/10", "l2/20", "l2/5", "l3/25", "l3/30", "l3/40", "l4/32", "l4/35", "l4/50", "s2/1", "s2/10", "s3/20", "s4/30"},
		},
		{
			name: "unknown modification times are not old", inv: planInventory(now,
				sess{epoch: 4, snapshots: []obj{{30, -1}, {50, -1}}, batches: []obj{{40, -1}, {50, -1}}},
				sess{epoch: 3, snapshots: []obj{{10, -1}}}), current: 4, retention: h,
			deleted:  nil,
			retained: 4,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			del, retained := plan(c.inv, c.current, c.lineage, Options{Retention: c.retention, Now: func() time.Time { return now }})
			assert.Equal(t, c.deleted, names(t, append(slices.Clone(del.snapshots), del.batches...)), "deleted")
			assert.Equal(t, c.retained, retained, "retained")
			for _, k := range del.snapshots {
				pk, _ := frames.ParseKey(k)
				assert.Equal(t, frames.KeySnapshot, pk.Kind, "%s among the snapshots", k)
			}
			for _, k := range append(slices.Clone(del.snapshots), del.batches...) {
				if pk, _ := frames.ParseKey(k); pk.Epoch > c.current {
					t.Errorf("%s: deletes a session newer than the current %d", k, c.current)
				}
			}
		})
	}
}

// TestCurrentEpoch: own.json decides; without it, the newest session that
// has a snapshot.
func TestCurrentEpoch(t *testing.T) {
	now := time.Now()
	inv := planInventory(now,
		sess{epoch: 7, batches: []obj{{3, 0}}},
		sess{epoch: 6, snapshots: []obj{{1, 0}}},
		sess{epoch: 5, snapshots: []obj{{0, 0}}},
	)
	if e, ok := currentEpoch(inv, nil); !ok || e != 6 {
		t.Errorf("without own.json: %d %v, want 6", e, ok)
	}
	if e, ok := currentEpoch(inv, &fence.Record{Epoch: 5}); !ok || e != 5 {
		t.Errorf("own.json epoch 5: %d %v, want 5", e, ok)
	}
	if _, ok := currentEpoch(planInventory(now, sess{epoch: 7, batches: []obj{{3, 0}}}), nil); ok {
		t.Error("no snapshot anywhere and no own.json: found a current session")
	}
}
