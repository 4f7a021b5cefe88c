package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// ErrHeld: a live node holds the actor. The *HeldError says which, so the
// runtime can forward the request there.
var ErrHeld = errors.New("fence: actor held by a live node")

// HeldError is ErrHeld with the holder.
type HeldError struct {
	Actor   frames.Actor
	Epoch   frames.Epoch
	Node    string
	Address string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("fence: %s is held by node %s at %s (epoch %d)", e.Actor.OwnKey(), e.Node, e.Address, e.Epoch)
}

func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// ErrHolderUnseen: own.json names a holder that has no lease, and this node
// has not yet seen it without one for Lease+Grace. The holder may still be
// acknowledging (it learns that its lease is gone only at its next
// renewal), so the claim must wait; the error says for how long. Retry
// then. It does not match ErrHeld: a node without a lease is stopping, so
// there is nowhere to forward to.
var ErrHolderUnseen = errors.New("fence: actor's holder has no lease; not yet claimable")

// ErrNotClaiming: the node stopped claiming (Node.StopClaiming), and the
// claim would have taken the actor from no one: own.json is absent,
// released, or names a node that is not alive. It does not match ErrHeld:
// nobody serves the actor, so there is nowhere to forward to.
var ErrNotClaiming = errors.New("fence: node no longer claims actors")

// Ownership is a claim this node won.
type Ownership struct {
	Actor frames.Actor
	Epoch frames.Epoch
	// Prev is the record the claim replaced (zero Epoch: there was none).
	// A released one may say where its session ended (Record.Seq): what
	// the new session restores must reach it. A held one names the
	// follower set its holder had, which this claim inherited.
	Prev Record
	// Followers and Quorum are the follower set own.json records for
	// this claim: inherited from a held Prev by Claim, replaced by
	// RecordFollowers. None: bucket-only.
	Followers []string
	Quorum    int
	retention time.Duration
	etag      string // own.json as we wrote it
}

// ClaimOptions is what a claim records beside the owner.
type ClaimOptions struct {
	// Retention is the claimant's retention window, recorded in own.json
	// (Record.Retention) so that compaction by anyone keeps covered
	// objects that long.
	Retention time.Duration
	// Suspect, when set, is asked about a held record whose holder's
	// lease is alive: nil means the holder is confirmed gone (by failure
	// detection: package quorum's Suspicion), and the claim replaces the
	// record without waiting for the lease or fencing it ("Claims on
	// suspicion" in the package doc). An error says why not, and the
	// claim is a *HeldError as without it. lease is the holder's, as
	// Judge read it.
	Suspect func(ctx context.Context, held Record, lease Lease) error
}

// maxClaimRounds bounds the retries of a claim that keeps losing races.
const maxClaimRounds = 8

// Claim takes an actor for this node, with a new epoch: one more than the
// larger of own.json's epoch and the newest session that has a batch or a
// snapshot in the bucket, so that an actor whose own.json was lost (or
// restored from an old copy) opens a session above every one it had.
//
// own.json is read with its ETag: absent → created (If-None-Match: *);
// released, or held by a node that is fenced, expired on this node's clock
// (then fenced first), or without a lease for Lease+Grace on this node's
// clock → replaced (If-Match) with the new epoch naming this node; held by
// a live node → *HeldError; held by a node whose lease this node has not
// yet seen missing for that long → ErrHolderUnseen; held by a live node
// that opts.Suspect confirms gone → replaced, without fencing its lease
// ("Claims on suspicion" in the package doc). A lost race (412) is
// read back before it counts as lost, because a retried PUT that landed
// answers 412 too.
//
// A held record's follower set (Record.Followers, Record.Quorum) is
// carried into the new record unchanged, and a released record's
// replacement has none. The followers of a held record may be the only
// holders of commits its holder acknowledged, so the claimant must fence
// them and recover their tail (package follow, "Takeover") before it
// records a set of its own (RecordFollowers); a claimant that crashes
// before it does leaves the next claimant the same set to fence.
//
// Every claim opens a new session, so a record naming this node already (a
// session this node did not release) is replaced with a new epoch too.
// Node IDs are random per Register, so a restarted process never takes its
// predecessor's record (at the same address) for its own: it waits for the
// predecessor's lease like any other claimant.
//
// After StopClaiming, only a record naming this node is replaced; every
// other claim fails with ErrNotClaiming, or a *HeldError for a live
// holder.
func (n *Node) Claim(ctx context.Context, a frames.Actor, opts ClaimOptions) (Ownership, error) {
	key := a.OwnKey()
	if opts.Retention < 0 || opts.Retention > MaxRetention {
		return Ownership{}, fmt.Errorf("fence: claiming %s: retention %v is not from 0 to %v", key, opts.Retention, MaxRetention)
	}
	floor, err := newestEpoch(ctx, n.b, a)
	if err != nil {
		return Ownership{}, err
	}
	var attempted *Record    // what the previous round tried to write
	var attemptedPrev Record // and the record it meant to replace
	for round := 0; round < maxClaimRounds; round++ {
		if err := n.Valid(); err != nil {
			return Ownership{}, err
		}
		cur, info, err := ReadRecord(ctx, n.b, a)
		stopped := n.claimsStopped()
		var next, prev Record
		var cond bucket.Condition
		switch {
		case errors.Is(err, bucket.ErrNotFound):
			if stopped {
				return Ownership{}, fmt.Errorf("%w: %s is absent", ErrNotClaiming, key)
			}
			next, cond = Record{Epoch: floor}, bucket.Condition{IfAbsent: true}
		case errors.Is(err, ErrBadRecord):
			return Ownership{}, err // never treat a damaged record as absent
		case err != nil:
			return Ownership{}, fmt.Errorf("fence: reading %s: %w", key, err)
		default:
			if attempted != nil && cur.Equal(*attempted) {
				// Our PUT landed though it answered 412 (a retry).
				return Ownership{Actor: a, Epoch: cur.Epoch, Prev: attemptedPrev, Followers: cur.Followers, Quorum: cur.Quorum,
					retention: opts.Retention, etag: info.ETag}, nil
			}
			prev = cur
			switch {
			case stopped && cur.Released():
				return Ownership{}, fmt.Errorf("%w: %s is released (epoch %d)", ErrNotClaiming, key, cur.Epoch)
			case stopped && cur.Node != n.id:
				return Ownership{}, n.notClaiming(ctx, a, cur)
			}
			if !cur.Released() && cur.Node != n.id {
				live, lease, err := n.Observer.Judge(ctx, cur.Node)
				if err == nil && live == Alive && opts.Suspect != nil && !stopped {
					if serr := opts.Suspect(ctx, cur, lease); serr == nil {
						live = Suspected
						n.log.Warn("claiming from a suspected holder", logattr.Key, key, logattr.Holder, cur.Node, logattr.Epoch, cur.Epoch)
					} else {
						n.log.Debug("holder not confirmed gone", logattr.Key, key, logattr.Holder, cur.Node, logattr.Err, serr)
					}
				}
				if err == nil && live == Expired {
					live, err = n.Observer.Fence(ctx, cur.Node)
				}
				if err != nil {
					return Ownership{}, err
				}
				switch live {
				case Alive:
					return Ownership{}, &HeldError{Actor: a, Epoch: cur.Epoch, Node: cur.Node, Address: cur.Address}
				case Unseen:
					return Ownership{}, fmt.Errorf("%w: %s names node %s (epoch %d), which has no lease %s; claimable in %v",
						ErrHolderUnseen, key, cur.Node, cur.Epoch, frames.NodeKey(cur.Node), n.Observer.claimableIn(cur.Node).Round(time.Millisecond))
				}
			}
			next, cond = Record{Epoch: max(cur.Epoch, floor)}, bucket.Condition{IfMatch: info.ETag}
			if !cur.Released() {
				next.Followers, next.Quorum = slices.Clone(cur.Followers), cur.Quorum
			}
		}
		if next.Epoch == math.MaxUint64 {
			return Ownership{}, fmt.Errorf("fence: claiming %s: epoch %d is the last there is", key, next.Epoch)
		}
		next.Epoch++
		next.Node, next.Address, next.Retention = n.id, n.address, opts.Retention
		attempted, attemptedPrev = &next, prev
		body := next.Marshal()
		won := func(etag string) Ownership {
			return Ownership{Actor: a, Epoch: next.Epoch, Prev: prev, Followers: next.Followers, Quorum: next.Quorum,
				retention: opts.Retention, etag: etag}
		}
		put, err := n.b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), cond)
		if err == nil {
			n.log.Info("claimed actor", logattr.Key, key, logattr.Epoch, next.Epoch)
			return won(put.ETag), nil
		}
		if !errors.Is(err, bucket.ErrPrecondition) {
			// The answer is unknown (a lost response, a timeout): the
			// PUT may have landed. Read it back before giving up.
			if cur, info, rerr := ReadRecord(ctx, n.b, a); rerr == nil && cur.Equal(next) {
				return won(info.ETag), nil
			}
			return Ownership{}, fmt.Errorf("fence: claiming %s: %w", key, err)
		}
		// Lost, or our retried PUT landed: the next round reads it back
		// (a record naming this node is ours).
	}
	return Ownership{}, fmt.Errorf("fence: claiming %s: lost %d races in a row", key, maxClaimRounds)
}

// StopClaiming makes this node's claims take no actor from anyone: from
// now on, a Claim of an actor whose own.json is absent, released, or held
// by a node that is not alive fails with ErrNotClaiming (a live holder is
// still a *HeldError, so requests are forwarded there, and a dead holder
// is not fenced). A record naming this node is claimed as before: nobody
// else can take it while this node lives. The lease keeps being renewed,
// so what the node holds keeps serving and being acknowledged, and no peer
// can take it meanwhile: it is how a node drains before it releases its
// actors and closes. A Claim already past its look at own.json may still
// succeed; the caller decides what to do with those. There is no undoing
// it, and a node from Restart claims again.
func (n *Node) StopClaiming() {
	n.mu.Lock()
	n.noClaims = true
	n.mu.Unlock()
}

func (n *Node) claimsStopped() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.noClaims
}

// notClaiming is a stopped node's answer for an actor held by another
// node: a *HeldError while the holder is alive, ErrNotClaiming otherwise.
// It only judges the holder: fencing a dead one is for whoever takes its
// actors.
func (n *Node) notClaiming(ctx context.Context, a frames.Actor, cur Record) error {
	live, _, err := n.Observer.Judge(ctx, cur.Node)
	switch {
	case err != nil:
		return fmt.Errorf("fence: claiming %s: %w", a.OwnKey(), err)
	case live == Alive:
		return &HeldError{Actor: a, Epoch: cur.Epoch, Node: cur.Node, Address: cur.Address}
	}
	return fmt.Errorf("%w: %s names node %s (epoch %d), %v", ErrNotClaiming, a.OwnKey(), cur.Node, cur.Epoch, live)
}

// newestEpoch returns the epoch of the newest session that has an object
// under the actor's log/ or snapshot/, 0 if none. Epochs are descending in
// keys, so the first key listed under each prefix names its newest session:
// one List of one key per prefix. Keys that do not parse are not sessions
// (restore does not read them either) and are listed past.
func newestEpoch(ctx context.Context, b bucket.Bucket, a frames.Actor) (frames.Epoch, error) {
	var newest frames.Epoch
	for _, prefix := range []string{a.LogPrefix(), a.SnapshotPrefix()} {
		after, limit := "", 1
	page:
		for {
			p, err := b.List(ctx, prefix, after, limit)
			if err != nil {
				return 0, fmt.Errorf("fence: listing %s: %w", prefix, err)
			}
			for _, info := range p.Objects {
				k, err := frames.ParseKey(info.Key)
				if err == nil && k.ActorOf() == a && (k.Kind == frames.KeyLog || k.Kind == frames.KeySnapshot) {
					newest = max(newest, k.Epoch)
					break page
				}
			}
			if !p.More || len(p.Objects) == 0 {
				break
			}
			after, limit = p.Objects[len(p.Objects)-1].Key, 0
		}
	}
	return newest, nil
}

// Release marks the actor released (node "", epoch kept), after its final
// flush, with If-Match on the record this claim wrote. seq is the last
// sequence number the session made durable (0 if unknown): recorded, it lets
// verify and restore tell a session whose newest objects were lost from one
// that ended there. If the record changed (a peer fenced this node and took
// over), it returns ErrFenced: the caller no longer owned the actor.
func (n *Node) Release(ctx context.Context, o Ownership, seq frames.Seq) error {
	key := o.Actor.OwnKey()
	body := Record{Epoch: o.Epoch, Seq: seq, Retention: o.retention}.Marshal()
	_, err := n.b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: o.etag})
	if err == nil {
		n.log.Info("released actor", logattr.Key, key, logattr.Epoch, o.Epoch, logattr.Seq, seq)
		return nil
	}
	// A 412, or no answer at all: read it back. Released at our epoch
	// means our PUT landed (a retry, or a lost response).
	if cur, _, rerr := ReadRecord(ctx, n.b, o.Actor); rerr == nil && cur.Epoch == o.Epoch && cur.Released() {
		return nil
	}
	if !errors.Is(err, bucket.ErrPrecondition) {
		return fmt.Errorf("fence: releasing %s: %w", key, err)
	}
	return fmt.Errorf("%w: %s changed while this node held epoch %d", ErrFenced, key, o.Epoch)
}

// ReleaseUnclaimed records a session that runs without a claim (a writer
// without a node, whose caller guarantees it is the only one): own.json
// becomes released at epoch, with seq (0 while the session runs: its end is
// not known yet) and retention, as a claim and Release would leave it. So
// own.json names the newest session for restore and compaction, and once
// the session closed, verify and restore can tell a lost tail from an end.
// It never replaces a record of a newer epoch, nor one a node holds
// (ErrFenced: someone else owns the actor); a lost race is read back.
func ReleaseUnclaimed(ctx context.Context, b bucket.Bucket, a frames.Actor, epoch frames.Epoch, seq frames.Seq, retention time.Duration) error {
	key := a.OwnKey()
	next := Record{Epoch: epoch, Seq: seq, Retention: retention}
	body := next.Marshal()
	for round := 0; round < maxClaimRounds; round++ {
		cur, info, err := ReadRecord(ctx, b, a)
		var cond bucket.Condition
		switch {
		case errors.Is(err, bucket.ErrNotFound):
			cond = bucket.Condition{IfAbsent: true}
		case err != nil:
			return err
		case cur.Equal(next):
			return nil
		case cur.Epoch > epoch || (!cur.Released() && cur.Epoch == epoch):
			return fmt.Errorf("%w: %s names epoch %d (node %q), newer than or holding session %d", ErrFenced, key, cur.Epoch, cur.Node, epoch)
		case !cur.Released():
			return fmt.Errorf("%w: %s is held by node %s (epoch %d)", ErrFenced, key, cur.Node, cur.Epoch)
		default:
			cond = bucket.Condition{IfMatch: info.ETag}
		}
		_, err = b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), cond)
		if err == nil {
			return nil
		}
		if !errors.Is(err, bucket.ErrPrecondition) {
			if cur, _, rerr := ReadRecord(ctx, b, a); rerr == nil && cur.Equal(next) {
				return nil
			}
			return fmt.Errorf("fence: recording the end of session %d in %s: %w", epoch, key, err)
		}
	}
	return fmt.Errorf("fence: recording the end of session %d in %s: lost %d races in a row", epoch, key, maxClaimRounds)
}
