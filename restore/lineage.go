package restore

// The lineage: every manifest of a session records the session it
// continued and the sequence number it continued from (frames.Manifest's
// Predecessor, the same in each manifest of the session). Following it from
// the chosen session back gives the actor's history across sessions:
// session e holds the history after the point its predecessor p continued
// to, and p holds the history up to that point, and nothing p holds past it
// (a superseded owner's late frames, which its successor never saw) is
// anyone's history.
//
// A target before the oldest state the chosen session holds is planned in
// its predecessor, capped at the point the chosen session continued from
// (Target.capTo: no snapshot past it, no batch ending past it, the replay
// stops there), and so on back, as long as
//
//   - the session records a lineage (a session of full snapshots, written
//     before manifests, does not: the walk stops there), and its
//     predecessor is in the bucket;
//   - for a sequence number target, the number is at most the point the
//     session continued from: between that point and the session's oldest
//     snapshot lie frames the session compacted away (or commits it kept
//     from a crashed predecessor, never uploaded as frames), which no
//     older session holds;
//   - for a time target, the session still holds the state it started
//     from (its oldest snapshot is at the point it continued from): only
//     then is its oldest commit time the start of its history, and a time
//     before it provably before every frame it wrote.
//
// The predecessor's plan must reach the point its successor continued
// from when the target is at or past it (Plan.EndSeq): a predecessor
// whose objects end earlier lost them, and the replay fails with a
// *TailError instead of returning an older state.

import (
	"context"
	"errors"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// SessionLineage returns the lineage session s records: the session it
// continued and the sequence number it continued from (Epoch 0: it started a
// new database), read from its oldest snapshot that is a manifest, and that
// manifest's key. known is false when no snapshot of s is a manifest
// (written before manifests: the lineage was not recorded). A manifest that
// cannot be read is passed over for the next; if none can, the first error
// is returned.
func SessionLineage(ctx context.Context, b bucket.Bucket, s *Session, lim frames.Limits) (lin frames.Lineage, key string, known bool, err error) {
	var first error
	for _, o := range s.Snapshots {
		m, err := readManifest(ctx, b, o.Key, lim)
		if err != nil {
			if errors.Is(err, bucket.ErrNotFound) || ctx.Err() != nil {
				return frames.Lineage{}, "", false, err // re-plan
			}
			if first == nil {
				first = err
			}
			continue
		}
		if m != nil {
			return m.Predecessor, o.Key, true, nil
		}
	}
	return frames.Lineage{}, "", false, first
}

// readManifest reads the snapshot at key: its manifest, or nil for a full
// snapshot (only its header is read).
func readManifest(ctx context.Context, b bucket.Bucket, key string, lim frames.Limits) (*frames.Manifest, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	_, m, err := frames.OpenSnapshot(rc, key, lim)
	return m, err
}

// planLineage plans target from session s back along the lineage (see
// above). The error for a target no session reaches is the *TargetError of
// the oldest session tried; with OrNearest, that session's nearest state
// is planned instead.
func planLineage(ctx context.Context, b bucket.Bucket, inv *Inventory, s *Session, target Target, lim frames.Limits) (Plan, error) {
	exact := target.exact()
	cur, t := s, exact
	var continuedBy frames.Epoch
	var continuedKey string
	done := func(p Plan, err error) (Plan, error) {
		if err != nil {
			return Plan{}, err
		}
		if cur != s {
			p.EndSeq, p.ContinuedBy, p.ContinuedKey = t.ceiling, uint64(continuedBy), continuedKey
		}
		if p.OutOfRange != nil {
			p.OutOfRange.Target = target
		} else {
			// The replay may still find the target out of range (a state
			// that cannot be placed in time): OrNearest holds there too.
			p.Target.nearest = target.nearest
		}
		return p, nil
	}
	for {
		p, err := planSession(ctx, b, inv.Actor, cur, t, lim)
		var te *TargetError
		if err == nil || !errors.As(err, &te) || !te.before {
			if te != nil {
				te.Target = target
				if target.nearest {
					return done(planSession(ctx, b, inv.Actor, cur, t.OrNearest(), lim))
				}
			}
			return done(p, err)
		}
		te.Target = target
		next, nt, key, ok, lerr := predecessor(ctx, b, inv, cur, t, lim)
		if lerr != nil {
			return Plan{}, lerr
		}
		if !ok {
			if target.nearest {
				return done(planSession(ctx, b, inv.Actor, cur, t.OrNearest(), lim))
			}
			return Plan{}, te
		}
		continuedBy, continuedKey = cur.Epoch, key
		cur, t = next, nt
	}
}

// predecessor returns the session s continued and t capped at the point it
// continued from, when t may be found there (see above); ok false when not.
func predecessor(ctx context.Context, b bucket.Bucket, inv *Inventory, s *Session, t Target, lim frames.Limits) (*Session, Target, string, bool, error) {
	lin, key, known, err := SessionLineage(ctx, b, s, lim)
	if err != nil {
		return nil, Target{}, "", false, err
	}
	if !known || lin.Epoch == 0 || lin.Epoch >= s.Epoch {
		return nil, Target{}, "", false, nil
	}
	prev, ok := inv.Session(lin.Epoch)
	if !ok || len(prev.Snapshots) == 0 {
		return nil, Target{}, "", false, nil
	}
	switch {
	case t.kind == targetSeq && t.seq > lin.Seq:
		return nil, Target{}, "", false, nil
	case t.kind == targetTime && s.Snapshots[0].Seq != lin.Seq:
		return nil, Target{}, "", false, nil
	}
	return prev, t.capTo(lin.Seq), key, true, nil
}
