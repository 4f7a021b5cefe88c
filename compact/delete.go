package compact

import (
	"context"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// deletion is what a pass deletes: snapshots and batches, kept apart
// because snapshots go first (see deleteAll).
type deletion struct {
	snapshots, batches []string
}

func (d deletion) len() int { return len(d.snapshots) + len(d.batches) }

// covered returns every object of the sessions up to current that the keep
// point from makes unnecessary: whole sessions older than from's, and in
// from's session the snapshots before it and the batches ending at or
// before its sequence number. Sessions newer than current, the keep point itself and
// everything after it are never in it.
func covered(inv *restore.Inventory, current frames.Epoch, from restore.Object) deletion {
	var d deletion
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		switch {
		case s.Epoch > current || s.Epoch > from.Epoch:
			continue
		case s.Epoch < from.Epoch:
			for _, o := range s.Snapshots {
				d.snapshots = append(d.snapshots, o.Key)
			}
			for _, o := range s.Batches {
				d.batches = append(d.batches, o.Key)
			}
		default:
			for _, o := range s.Snapshots {
				if o.Seq < from.Seq {
					d.snapshots = append(d.snapshots, o.Key)
				}
			}
			for _, o := range s.Batches {
				if o.Seq <= from.Seq {
					d.batches = append(d.batches, o.Key)
				}
			}
		}
	}
	return d
}

// noHistory returns the objects of sessions older than current that the
// lineage never reaches (see lineage.go), except those of sessions up to
// from's (covered deletes those) and from's own objects up to its
// sequence number (covered decides them).
func noHistory(inv *restore.Inventory, current frames.Epoch, lin *lineage, from restore.Object, haveFrom bool) deletion {
	var d deletion
	if lin == nil {
		return d
	}
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		if s.Epoch >= current || haveFrom && s.Epoch < from.Epoch {
			continue
		}
		whole := lin.noHistory(s.Epoch)
		k, _ := lin.link(s.Epoch)
		for _, o := range s.Snapshots {
			if whole || k.capped && o.Seq > k.ceiling {
				d.snapshots = append(d.snapshots, o.Key)
			}
		}
		for _, o := range s.Batches {
			if whole || k.capped && o.Seq > k.ceiling {
				d.batches = append(d.batches, o.Key)
			}
		}
	}
	return d
}

// plan returns what a pass deletes with the given retention, and how many
// covered objects the window keeps for now. lin is the current session's
// lineage (nil: not known, or not needed: no retention).
func plan(inv *restore.Inventory, current frames.Epoch, lin *lineage, opts Options) (del deletion, retained int) {
	all, ok := keepPoint(inv, current, nil, 0, opts.Now())
	if !ok {
		return deletion{}, 0 // the current session has no snapshot: nothing is covered
	}
	wholly := covered(inv, current, all).len()
	from, ok := keepPoint(inv, current, lin, opts.Retention, opts.Now())
	if ok {
		del = covered(inv, current, from)
	}
	extra := noHistory(inv, current, lin, from, ok)
	del.snapshots = append(del.snapshots, extra.snapshots...)
	del.batches = append(del.batches, extra.batches...)
	return del, wholly - del.len()
}

// deleteAll deletes snapshots before batches. Restoring the newest state
// never needs any of them, whatever part of the deletion happens; but for a
// point-in-time restore, a pass cut short after deleting some batches of an
// old snapshot would leave that snapshot with a hole after it (a gap error),
// whereas one cut short after deleting the snapshot leaves batches with no
// base, which a restore plan skips.
func deleteAll(ctx context.Context, b bucket.Bucket, a frames.Actor, d deletion) error {
	for _, keys := range [][]string{d.snapshots, d.batches} {
		if len(keys) == 0 {
			continue
		}
		if err := b.DeleteMany(ctx, keys); err != nil {
			return &Error{Op: "delete", Actor: a, Err: err}
		}
	}
	return nil
}
