package compact

// The lineage, as retention sees it: restore reaches back from the current
// session through the sessions its manifests name as predecessors, each up
// to the sequence number its successor continued from, and never further
// (restore/lineage.go). So what retention may need to keep of an older
// session is the part of it the lineage reaches: its objects up to that
// point. The rest is no one's history and goes whatever the window:
//
//   - a session the lineage passes over (a claim whose session its
//     successor did not continue: it restored from an older one);
//   - in a session of the lineage, the snapshots and batches past the point
//     its successor continued from (a superseded owner's late uploads).
//
// The walk reads one manifest per session it passes (the predecessor's
// oldest), and only when a window is set: with no retention every older
// session goes anyway. Where the lineage is not known (a session of full
// snapshots, written before manifests recorded it, or a manifest that does
// not read), the walk stops and the sessions older than that are treated
// as before lineages: kept or deleted by the keep point alone.

import (
	"context"
	"errors"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// link is one session of the lineage: its objects past ceiling are no
// history (capped false for the current session: all of it is).
type link struct {
	epoch   frames.Epoch
	ceiling frames.Seq
	capped  bool
}

// lineage is the current session's lineage as far as it is known.
type lineage struct {
	links []link // the current session first
	// complete: the walk ended at a session that started a new database,
	// or whose predecessor is not in the bucket, so no session outside
	// links is anyone's history. Otherwise the sessions older than the last
	// link may be.
	complete bool
}

// link returns the link of epoch, if the session is on the lineage.
func (l *lineage) link(epoch frames.Epoch) (link, bool) {
	for _, k := range l.links {
		if k.epoch == epoch {
			return k, true
		}
	}
	return link{}, false
}

// noHistory reports whether the session of epoch (older than the current
// one) holds nothing the lineage reaches: it is not on it, and the walk
// either went past it or knows every session of the history.
func (l *lineage) noHistory(epoch frames.Epoch) bool {
	if _, ok := l.link(epoch); ok {
		return false
	}
	return l.complete || epoch > l.links[len(l.links)-1].epoch
}

// walkLineage follows the lineage of the current session from lin, the
// lineage its newest manifest records (known false: its snapshot is a full
// snapshot, which records none), counting what it reads into read.
func walkLineage(ctx context.Context, b bucket.Bucket, owner *Owner, inv *restore.Inventory, current frames.Epoch, lin frames.Lineage, known bool,
	lim frames.Limits, read *int64) (*lineage, error) {
	l := &lineage{links: []link{{epoch: frames.Epoch(current)}}}
	for known {
		if lin.Epoch == 0 || lin.Epoch >= l.links[len(l.links)-1].epoch {
			l.complete = lin.Epoch == 0
			return l, nil
		}
		s, ok := inv.Session(lin.Epoch)
		if !ok {
			l.complete = true // nothing older is reachable
			return l, nil
		}
		l.links = append(l.links, link{epoch: lin.Epoch, ceiling: lin.Seq, capped: true})
		var err error
		if lin, known, err = sessionLineage(ctx, b, owner, s, lim, read); err != nil {
			return nil, &Error{Op: "read snapshot", Actor: inv.Actor, Key: inv.Actor.SnapshotSessionPrefix(s.Epoch), Err: err}
		}
	}
	return l, nil
}

// sessionLineage reads the lineage session s records, from its oldest
// snapshot that is a manifest and reads. known is false when none does.
// Only a vanished object (the pass starts over) or the context is an
// error: a damaged manifest leaves the lineage unknown, which only keeps
// more.
func sessionLineage(ctx context.Context, b bucket.Bucket, owner *Owner, s *restore.Session, lim frames.Limits, read *int64) (frames.Lineage, bool, error) {
	for _, o := range s.Snapshots {
		m, err := owner.read(ctx, b, o.Key, lim, read)
		switch {
		case errors.Is(err, bucket.ErrNotFound) || ctx.Err() != nil:
			return frames.Lineage{}, false, err
		case err == nil && m != nil:
			return m.Predecessor, true, nil
		}
	}
	return frames.Lineage{}, false, nil
}
