package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// Liveness is what an Observer concluded about a node.
type Liveness uint8

const (
	// Alive: its heartbeat changed less than Lease+Grace ago on the
	// observer's clock (or the observer has not watched it that long).
	Alive Liveness = iota + 1
	// Expired: its heartbeat has not changed for Lease+Grace: it may be
	// fenced.
	Expired
	// Fenced: its lease says fenced. The node stops at its next renewal,
	// and it was already invalid when it was fenced (its heartbeat had not
	// changed for Lease+Grace on the fencer's clock): nothing to wait for.
	Fenced
	// Gone: it has had no lease for Lease+Grace on the observer's clock.
	Gone
	// Unseen: it has no lease, but the observer has not seen it absent for
	// Lease+Grace yet. A lease deleted by an operator, a sweep or a clock
	// disagreement does not stop its node: the node learns it at its next
	// renewal and may acknowledge until its last renewal is a lease old. So
	// an absent lease is waited out like an unchanged heartbeat.
	Unseen
	// Suspected: its lease is alive, but failure detection confirmed it
	// gone (ClaimOptions.Suspect). Judge never returns it; a claim that
	// found it replaces the node's record of one actor and fences
	// nothing else of it.
	Suspected
)

func (l Liveness) String() string {
	switch l {
	case Alive:
		return "alive"
	case Expired:
		return "expired"
	case Fenced:
		return "fenced"
	case Gone:
		return "gone"
	case Unseen:
		return "unseen"
	case Suspected:
		return "suspected"
	}
	return fmt.Sprintf("Liveness(%d)", uint8(l))
}

// Observer judges other nodes' liveness by its own monotonic clock: it
// remembers when it last saw each node's heartbeat change, and never
// compares its clock with anyone else's. A node it has just started watching
// gets the full Lease+Grace from that moment.
//
// The clock is Clock.Now, which stops while this machine is suspended: an
// observer that was suspended counts less time than really passed, so it
// only waits longer before it fences anyone. That errs on the safe side;
// it is the node judging its own lease that must count suspended time
// (Node.Valid).
type Observer struct {
	b    bucket.Bucket
	opts Options

	mu        sync.Mutex
	seen      map[string]sighting
	lastPrune time.Time

	fences atomic.Int64 // leases this observer fenced
}

type sighting struct {
	absent    bool      // no lease: since is when this observer first saw that
	heartbeat uint64    // unless absent
	since     time.Time // when this observer first saw this heartbeat (or the absence)
	etag      string
	judged    time.Time // last Judge of the node: see pruneLocked
}

// NewObserver returns an observer with the lease timings of opts.
func NewObserver(b bucket.Bucket, opts Options) *Observer {
	return &Observer{b: b, opts: opts.withDefaults(), seen: map[string]sighting{}}
}

// Judge reads a node's lease and says whether it is alive. A missing
// lease is Unseen until it has been missing for Lease+Grace on this
// observer's clock, then Gone; a lease that reappears starts over.
func (o *Observer) Judge(ctx context.Context, id string) (Liveness, Lease, error) {
	l, info, err := ReadLease(ctx, o.b, id)
	absent := errors.Is(err, bucket.ErrNotFound)
	if err != nil && !absent {
		return 0, Lease{}, err
	}
	if l.Fenced {
		// A fenced lease never comes back to life (a restarted process
		// registers under a new id): nothing to remember about it.
		o.forget(id)
		return Fenced, l, nil
	}
	now := o.opts.Clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pruneLocked(now)
	s, ok := o.seen[id]
	if !ok || s.absent != absent || s.heartbeat != l.Heartbeat {
		o.seen[id] = sighting{absent: absent, heartbeat: l.Heartbeat, since: now, etag: info.ETag, judged: now}
		if absent {
			return Unseen, Lease{}, nil
		}
		return Alive, l, nil
	}
	s.etag, s.judged = info.ETag, now
	o.seen[id] = s
	expired := now.Sub(s.since) >= o.opts.Lease+o.opts.Grace
	switch {
	case absent && expired:
		return Gone, Lease{}, nil
	case absent:
		return Unseen, Lease{}, nil
	case expired:
		return Expired, l, nil
	}
	return Alive, l, nil
}

// forgetAfter is how long an observer keeps what it saw of a node it no
// longer judges. Forgetting is always safe: the node then gets the full
// Lease+Grace again from the next look. Remembering long enough matters
// for a node whose lease vanished while it held many actors: the claims
// of all of them, made one after another, wait for it once.
const forgetAfter = 10 // times Lease+Grace

// pruneLocked drops, at most once per Lease+Grace, the sightings of nodes
// not judged for forgetAfter×(Lease+Grace), so that an observer judging
// nodes that come and go over a long life does not grow. Called with o.mu
// held.
func (o *Observer) pruneLocked(now time.Time) {
	window := o.opts.Lease + o.opts.Grace
	if now.Sub(o.lastPrune) < window {
		return
	}
	o.lastPrune = now
	for id, s := range o.seen {
		if now.Sub(s.judged) >= forgetAfter*window {
			delete(o.seen, id)
		}
	}
}

// claimableIn says how long, on this observer's clock, until a node it
// judged Unseen would be Gone.
func (o *Observer) claimableIn(id string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[id]
	if !ok || !s.absent {
		return o.opts.Lease + o.opts.Grace
	}
	return max(0, s.since.Add(o.opts.Lease+o.opts.Grace).Sub(o.opts.Clock.Now()))
}

func (o *Observer) forget(id string) {
	o.mu.Lock()
	delete(o.seen, id)
	o.mu.Unlock()
}

// Fences counts the leases this observer fenced (Fence returned Fenced
// after writing the mark itself), for metrics.
func (o *Observer) Fences() int64 { return o.fences.Load() }

// Fence marks an expired node's lease fenced, with If-Match on the version
// Judge saw, so a node that renewed meanwhile is left alone (the result is
// then Alive). It returns the node's liveness afterwards: Fenced on success.
func (o *Observer) Fence(ctx context.Context, id string) (Liveness, error) {
	live, l, err := o.Judge(ctx, id)
	if err != nil || live != Expired {
		return live, err
	}
	o.mu.Lock()
	etag := o.seen[id].etag
	o.mu.Unlock()
	l.Fenced = true
	body := l.Marshal()
	_, err = o.b.Put(ctx, frames.NodeKey(id), bytes.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: etag})
	if err == nil {
		o.fences.Add(1)
		o.opts.Logger.Warn("fenced an expired node", logattr.Subsystem, logattr.SubsystemFence, logattr.Node, id, "heartbeat", l.Heartbeat)
		return Fenced, nil
	}
	if !errors.Is(err, bucket.ErrPrecondition) && !errors.Is(err, bucket.ErrNotFound) {
		return 0, fmt.Errorf("fence: fencing node %s: %w", id, err)
	}
	// Someone changed it first (a renewal, another fencer, a lost answer
	// to our own PUT): look again.
	live, _, err = o.Judge(ctx, id)
	if live == Expired {
		live = Alive // changed under us but not fenced: be conservative
	}
	return live, err
}
