package compact

// Retention: covered objects stay in the bucket while a point-in-time
// restore to a moment less than Options.Retention ago may need them.
//
// Keeping each object until its own modification time leaves the window is
// not enough: restoring to a time T needs the newest snapshot at or before T
// and every batch after it, and that snapshot is usually much older than T.
// Deleting the old batches after it one by one, as they age out, would
// leave the snapshot with a hole after it and every target in the window
// unreachable. Instead the pass finds the keep point: the newest snapshot,
// across the current session and the older ones (in epoch, then sequence
// order), whose modification time is at least Retention ago. Every target T
// in the window can restore from it, because a snapshot uploaded before the
// window opened covers only frames committed before T (a commit precedes its
// upload). Everything before the keep point goes, everything from it on
// stays; when no snapshot is that old yet, nothing goes.
//
// With Retention 0 the keep point is simply the current session's newest
// snapshot, without looking at any clock (so a server clock ahead of ours
// cannot hold a deletion back).
//
// Across sessions, the keep point is looked for along the lineage only
// (lineage.go): the sessions the current one continued, each up to the
// point its successor continued from. Sessions the lineage passes over,
// and what a session of it holds past that point, restore never reaches;
// they go whatever the window (delete.go).
//
// Times compared are the bucket's modification times (the server's clock)
// against Options.Now (ours): a skew between them shifts the window by as
// much, which is why a window should be generous compared with clock skew.

import (
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// keepPoint returns the snapshot from which every object of sessions up to
// current must be kept. ok is false when nothing may be deleted: the
// current session has no snapshot, or with a window, no snapshot is old
// enough yet.
//
// lin is the current session's lineage (nil: not known, every older
// session is a candidate, in epoch order).
func keepPoint(inv *restore.Inventory, current frames.Epoch, lin *lineage, retention time.Duration, now time.Time) (restore.Object, bool) {
	cur, ok := inv.Session(frames.Epoch(current))
	if !ok || len(cur.Snapshots) == 0 {
		return restore.Object{}, false
	}
	if retention <= 0 {
		return cur.Snapshots[len(cur.Snapshots)-1], true
	}
	cutoff := now.Add(-retention)
	for i := range inv.Sessions { // newest session first: the lineage's order
		s := &inv.Sessions[i]
		if s.Epoch > current || lin != nil && s.Epoch < current && lin.noHistory(s.Epoch) {
			continue
		}
		var k link
		if lin != nil {
			k, _ = lin.link(s.Epoch)
		}
		for j := len(s.Snapshots) - 1; j >= 0; j-- {
			o := s.Snapshots[j]
			if k.capped && o.Seq > k.ceiling {
				continue // past the point the successor continued from
			}
			// A zero time is a backend that did not say: not known to be
			// old, so kept.
			if !o.ModTime.IsZero() && !o.ModTime.After(cutoff) {
				return o, true
			}
		}
	}
	return restore.Object{}, false
}
