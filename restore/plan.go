package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// Plan is what one restore reads: a session, the snapshot to start from,
// and the batches that may follow it. Which batches actually apply is
// decided while replaying, from their headers (see Replay).
type Plan struct {
	Actor  frames.Actor
	Epoch  frames.Epoch // the session's
	Target Target
	// Snapshot is the newest snapshot of the session at or before the
	// target.
	Snapshot Object
	// Batches are every batch of the session ending after the snapshot,
	// ascending by last sequence number. Replay stops early once the
	// target is reached.
	Batches []Object
	// Own is the ownership record read while planning (nil: absent, or
	// planned for an explicit session by PlanSession).
	Own *fence.Record
	// OutOfRange is set when the target asked for was outside the session
	// and OrNearest asked for the nearest state: Target is then that state.
	OutOfRange *TargetError
	// EndSeq is where own.json says the session ended when it was
	// released (fence.Record.Seq; 0: not released, or unknown), or, for a
	// session reached through the lineage, the sequence number its
	// successor ContinuedBy continued from (the plan's target goes no
	// further). A replay that wants commits past what the objects reach
	// fails with a *TailError then, rather than return an older state.
	EndSeq      frames.Seq
	ContinuedBy uint64
	// ContinuedKey is the successor's manifest that says so.
	ContinuedKey string
}

// check refuses a plan that planActor or PlanSession would not make: a plan
// is exported, and replaying objects of another session or out of order
// would build a state no session ever had.
func (p Plan) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: invalid plan: %s", frames.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !p.Actor.Valid() {
		return bad("invalid actor %+v", p.Actor)
	}
	if p.Snapshot.Kind != frames.KeySnapshot || p.Snapshot.Epoch != p.Epoch || !strings.HasPrefix(p.Snapshot.Key, p.Actor.Prefix()) {
		return bad("snapshot %q is not a snapshot of session %d of the actor", p.Snapshot.Key, p.Epoch)
	}
	prev := p.Snapshot.Seq
	for _, o := range p.Batches {
		if o.Kind != frames.KeyLog || o.Epoch != p.Epoch || o.Seq <= prev || !strings.HasPrefix(o.Key, p.Actor.Prefix()) {
			return bad("batch %q is not a batch of session %d ending after %d", o.Key, p.Epoch, prev)
		}
		prev = o.Seq
	}
	return nil
}

// planActor chooses what Restore restores of the actor from an inventory,
// reading own.json and, for a time target, snapshot headers:
//
//   - the session own.json names, if it has a snapshot; else the newest
//     session with a snapshot. A damaged own.json is an error naming it,
//     never taken for an absent one, and so is an own.json whose epoch is
//     older than a session in the bucket (ErrOwnMismatch): nothing writes a
//     session newer than the claim that opened it. A session newer than the
//     one chosen that holds batches but no snapshot is an error too
//     (ErrNoSnapshot and lanes.ErrGap): falling back past it would drop
//     its frames without a word. Newer sessions without any batch are a
//     claim that has not written its first snapshot yet, and are passed
//     over.
//   - then the newest snapshot of that session at or before the target,
//     or, for a target before the oldest state it holds, of the session it
//     continued, along the lineage (lineage.go);
//   - then every batch of that session ending after it (and, in a session
//     reached through the lineage, not past the point its successor
//     continued from).
//
// A target outside the session is a *TargetError, unless it was made by
// OrNearest (see Target).
func planActor(ctx context.Context, b bucket.Bucket, inv *Inventory, target Target, lim frames.Limits) (Plan, error) {
	fail := func(epoch frames.Epoch, key string, err error) (Plan, error) {
		return Plan{}, &Error{Op: "plan", Actor: inv.Actor.Prefix(), Epoch: epoch, Key: key, Err: err}
	}
	own, err := readOwn(ctx, b, inv)
	if err != nil {
		return fail(0, inv.Actor.OwnKey(), err)
	}
	s, err := chooseSession(inv, own)
	if errors.Is(err, ErrNoSnapshot) && own != nil && own.Released() && own.Seq > 0 {
		// own.json says the history reached a commit no object holds.
		key := inv.Actor.OwnKey()
		return fail(0, key, fmt.Errorf("%w: %w", &TailError{Key: key, EndSeq: own.Seq}, err))
	}
	if err != nil {
		return fail(0, "", err)
	}
	// A released own.json names where the actor's history ended; the
	// session chosen is the newest with objects at or below its epoch
	// (chooseSession refuses newer sessions with batches).
	var end frames.Seq
	if own != nil && own.Released() && own.Epoch >= s.Epoch {
		end = own.Seq
	}
	// A tail lost is known from the listing for a target that wants it;
	// for a time target, once the replay runs out of frames (replay.go).
	if last := s.LastSeq(); last < end {
		n, isSeq := target.Seq()
		if target.IsLatest() || (isSeq && n > last) {
			return fail(s.Epoch, inv.Actor.OwnKey(), &TailError{Key: inv.Actor.OwnKey(), Epoch: s.Epoch, ReachedSeq: last, EndSeq: end})
		}
	}
	p, err := planLineage(ctx, b, inv, s, target, lim)
	if err != nil {
		return fail(s.Epoch, "", err)
	}
	p.Own = own
	if p.Epoch == s.Epoch {
		p.EndSeq = end
	}
	return p, nil
}

// PlanSession plans a restore of one given session to target: its newest
// snapshot at or before the target and the batches after it. Compaction
// replays it (Replay) to rebuild the current session; Restore plans with
// planActor instead, which chooses the session from own.json.
func PlanSession(ctx context.Context, b bucket.Bucket, inv *Inventory, epoch frames.Epoch, target Target, lim frames.Limits) (Plan, error) {
	s, ok := inv.Session(epoch)
	if !ok {
		return Plan{}, &Error{Op: "plan", Actor: inv.Actor.Prefix(), Epoch: epoch,
			Err: fmt.Errorf("%w: the session has no objects", ErrNoSnapshot)}
	}
	p, err := planSession(ctx, b, inv.Actor, s, target, lim)
	if err != nil {
		return Plan{}, &Error{Op: "plan", Actor: inv.Actor.Prefix(), Epoch: epoch, Err: err}
	}
	return p, nil
}

// readOwn reads and parses the actor's own.json (fence.ReadRecord): nil
// when the inventory listed none (or it vanished since). A record that does
// not parse, or is larger than any record, is an error matching
// fence.ErrBadRecord.
func readOwn(ctx context.Context, b bucket.Bucket, inv *Inventory) (*fence.Record, error) {
	if inv.Own == nil {
		return nil, nil
	}
	rec, _, err := fence.ReadRecord(ctx, b, inv.Actor)
	if errors.Is(err, bucket.ErrNotFound) {
		// Deleted between the listing and now: nothing deletes own.json
		// but an operator, and the listing is the snapshot we plan from.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// chooseSession picks the session to restore (see planActor).
func chooseSession(inv *Inventory, own *fence.Record) (*Session, error) {
	if len(inv.Sessions) == 0 {
		return nil, fmt.Errorf("%w: the actor has no batches or snapshots", ErrNoSnapshot)
	}
	if newest := inv.Sessions[0].Epoch; own != nil && own.Epoch < newest {
		return nil, fmt.Errorf("%w (%w): %s names epoch %d, but session %d exists: the record is damaged or stale",
			ErrOwnMismatch, fence.ErrBadRecord, inv.Actor.OwnKey(), own.Epoch, newest)
	}
	var s *Session
	if own != nil {
		if cand, ok := inv.Session(own.Epoch); ok && len(cand.Snapshots) > 0 {
			s = cand
		}
	}
	if s == nil {
		var ok bool
		if s, ok = inv.NewestWithSnapshot(); !ok {
			return nil, noSnapshotGap(&inv.Sessions[0])
		}
	}
	for i := range inv.Sessions {
		if n := &inv.Sessions[i]; n.Epoch > s.Epoch && len(n.Batches) > 0 {
			return nil, noSnapshotGap(n)
		}
	}
	return s, nil
}

// noSnapshotGap is the error for a session holding batches but no
// snapshot: its frames cannot be replayed, which is a gap.
func noSnapshotGap(s *Session) error {
	return fmt.Errorf("%w: session %d holds %d batches but no snapshot: its frames cannot be restored (%w)",
		ErrNoSnapshot, s.Epoch, len(s.Batches), lanes.ErrGap)
}

// planSession picks the snapshot and batches of session s for target.
func planSession(ctx context.Context, b bucket.Bucket, a frames.Actor, s *Session, target Target, lim frames.Limits) (Plan, error) {
	p := Plan{Actor: a, Epoch: s.Epoch, Target: target}
	if len(s.Snapshots) == 0 {
		return Plan{}, fmt.Errorf("%w: the session has none", ErrNoSnapshot)
	}
	outOfRange := func() *TargetError {
		e := &TargetError{Target: target, Epoch: s.Epoch, FirstSeq: s.Snapshots[0].Seq, LastSeq: s.Snapshots[len(s.Snapshots)-1].Seq}
		if n := len(s.Batches); n > 0 {
			e.LastSeq = max(e.LastSeq, s.Batches[n-1].Seq)
		}
		if target.capped {
			e.LastSeq = min(e.LastSeq, target.ceiling)
		}
		return e
	}
	if f, ok := target.Seq(); ok {
		if e := outOfRange(); f > e.LastSeq {
			// The listing shows where the session ends: no state past it
			// can be restored, and the newest state is not seq f.
			if !target.nearest {
				return Plan{}, e
			}
			p.Target, p.OutOfRange = target.like(Latest()), e
		}
	}
	found := false
	var oldest frames.Snapshot // the oldest snapshot's header, for a time target
	for i := len(s.Snapshots) - 1; i >= 0 && !found; i-- {
		o := s.Snapshots[i]
		switch {
		case target.kind == targetTime:
			// Only the header knows a snapshot's commit time.
			hdr, err := snapshotHeader(ctx, b, o.Key, lim)
			if err != nil {
				return Plan{}, err
			}
			found, oldest = target.admitsSnapshot(hdr.Seq, hdr.CommitTime), hdr
		default:
			found = p.Target.admitsSnapshot(o.Seq, 0)
		}
		if found {
			p.Snapshot = o
		}
	}
	if !found {
		// Before the oldest snapshot: the state asked for was compacted
		// away, or is in a superseded session.
		e := outOfRange()
		e.before = true
		if target.kind == targetTime {
			e.EarliestSeq, e.EarliestTime = oldest.Seq, time.Unix(0, oldest.CommitTime)
		}
		if !target.nearest {
			return Plan{}, e
		}
		p.Snapshot, p.Target, p.OutOfRange = s.Snapshots[0], target.like(ToSeq(s.Snapshots[0].Seq)), e
	}
	for _, o := range s.Batches {
		// Past a ceiling, the batches hold frames no successor continued
		// from (a superseded owner's late ones): never read.
		if o.Seq > p.Snapshot.Seq && (!target.capped || o.Seq <= target.ceiling) {
			p.Batches = append(p.Batches, o)
		}
	}
	return p, nil
}

// snapshotHeader reads just the header of a snapshot: a full snapshot's
// first message, or a whole manifest (small: it holds no pages).
func snapshotHeader(ctx context.Context, b bucket.Bucket, key string, lim frames.Limits) (frames.Snapshot, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return frames.Snapshot{}, err
	}
	defer rc.Close()
	sr, m, err := frames.OpenSnapshot(rc, key, lim)
	if err != nil {
		return frames.Snapshot{}, err
	}
	if m != nil {
		return m.Header(), nil
	}
	return sr.Header(), nil
}

// batchHeader reads just the header of a batch.
func batchHeader(ctx context.Context, b bucket.Bucket, key string, lim frames.Limits) (frames.BatchHeader, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return frames.BatchHeader{}, err
	}
	defer rc.Close()
	br, err := frames.NewBatchReader(rc, key, lim)
	if err != nil {
		return frames.BatchHeader{}, err
	}
	return br.Header(), nil
}
