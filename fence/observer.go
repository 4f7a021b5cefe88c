package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
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
	// Fenced: its lease says fenced.
	Fenced
	// Gone: it has no lease (deregistered, or never registered).
	Gone
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

	mu   sync.Mutex
	seen map[string]sighting
}

type sighting struct {
	heartbeat uint64
	since     time.Time // when this observer first saw this heartbeat
	etag      string
}

// NewObserver returns an observer with the lease timings of opts.
func NewObserver(b bucket.Bucket, opts Options) *Observer {
	return &Observer{b: b, opts: opts.withDefaults(), seen: map[string]sighting{}}
}

// Judge reads a node's lease and says whether it is alive.
func (o *Observer) Judge(ctx context.Context, id string) (Liveness, Lease, error) {
	l, info, err := readLease(ctx, o.b, id)
	if errors.Is(err, bucket.ErrNotFound) {
		o.forget(id)
		return Gone, Lease{}, nil
	}
	if err != nil {
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
	s, ok := o.seen[id]
	if !ok || s.heartbeat != l.Heartbeat {
		o.seen[id] = sighting{heartbeat: l.Heartbeat, since: now, etag: info.ETag}
		return Alive, l, nil
	}
	s.etag = info.ETag
	o.seen[id] = s
	if now.Sub(s.since) >= o.opts.Lease+o.opts.Grace {
		return Expired, l, nil
	}
	return Alive, l, nil
}

func (o *Observer) forget(id string) {
	o.mu.Lock()
	delete(o.seen, id)
	o.mu.Unlock()
}

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
		o.opts.Logger.Warn("fenced an expired node", "subsystem", "fence", "node", id, "heartbeat", l.Heartbeat)
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
