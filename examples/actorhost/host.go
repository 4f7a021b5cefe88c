package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// host is the actor map of one node and the lifecycle of every actor in
// it: opened once on first use (however many requests arrive together),
// shared by the requests in flight, closed when idle, dropped when its
// database stops, closed all together at the end.
//
// An actor's states, all under host.mu:
//
//	opening  in the map, ready not closed: requests wait for ready
//	open     ready closed, err nil: requests take a reference
//	closing  closing (or dropped) set: requests wait for gone, then open
//	         it anew
//	gone     out of the map, gone closed
//
// A failed open leaves the map at once, so the next request tries again
// (and may find the actor held elsewhere, or released).
type host struct {
	cfg  config
	b    bucket.Bucket
	node *fence.Node
	log  *slog.Logger
	fwd  *forwarder

	// ctx bounds opens and background work; cancelled once every actor
	// is closed.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	actors   map[actorKey]*actor
	stopping bool           // draining or abandoned: no more opens
	bg       sync.WaitGroup // opens and closes running in the background

	// opening bounds the opens running at once. A node that takes over
	// a dead peer's actors gets requests for all of them together; each
	// open restores a database and uploads a snapshot. Unbounded, they
	// compete with the lease renewal for the disk and the bucket, and a
	// renewal that starts late ends the node.
	opening chan struct{}
}

// maxOpening: see host.opening.
const maxOpening = 4

// actorKey names an actor: its namespace and its ID as the URL gives them.
type actorKey struct{ ns, id string }

// actor is one entry of the map.
type actor struct {
	key   actorKey
	ready chan struct{} // closed once the open ended; db or err is set
	db    *actorDB
	err   error
	gone  chan struct{} // closed once closed and out of the map

	// Guarded by host.mu.
	refs     int       // requests using it
	lastUsed time.Time // when the last request finished
	closing  bool
	dropped  bool  // its database stopped: close it once unused
	closeErr error // set before gone is closed
}

// errStopping: the node is draining or abandoning its actors.
var errStopping = errors.New("actorhost: node is shutting down")

// openTimeout bounds one open: claim, restore, first snapshot upload. A
// restore of a large actor over a slow link is the long part.
const openTimeout = 5 * time.Minute

// closeTimeout bounds one close (final flush and release) outside a drain.
const closeTimeout = time.Minute

func newHost(cfg config, b bucket.Bucket, node *fence.Node, log *slog.Logger) *host {
	ctx, cancel := context.WithCancel(context.Background())
	return &host{
		cfg: cfg, b: b, node: node, log: log,
		// A holder that does not answer within lease + grace is either
		// dead or about to be fenced: the caller retries meanwhile.
		fwd:     newForwarder(node.ID(), cfg.lease+cfg.grace, log),
		ctx:     ctx,
		cancel:  cancel,
		actors:  map[actorKey]*actor{},
		opening: make(chan struct{}, maxOpening),
	}
}

// acquire returns the open actor for key, opening it if needed, with a
// reference the caller gives back with release. An actor held by another
// live node is a *fence.HeldError (match with errors.As).
func (h *host) acquire(ctx context.Context, key actorKey) (*actor, error) {
	for {
		h.mu.Lock()
		if h.stopping {
			h.mu.Unlock()
			return nil, errStopping
		}
		a := h.actors[key]
		if a != nil && (a.closing || a.dropped) {
			// Its release must land before the next claim, or the claim
			// would find own.json naming this node at the old epoch. A
			// dropped actor closes once its last request is done.
			gone := a.gone
			h.mu.Unlock()
			select {
			case <-gone:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if a == nil {
			a = &actor{key: key, ready: make(chan struct{}), gone: make(chan struct{})}
			h.actors[key] = a
			h.bg.Add(1)
			// The open runs on the host's context, not the first
			// request's: others may be waiting for it.
			go h.open(a)
		}
		a.refs++
		h.mu.Unlock()
		select {
		case <-a.ready:
		case <-ctx.Done():
			h.release(a)
			return nil, ctx.Err()
		}
		if a.err != nil {
			h.release(a)
			return nil, a.err
		}
		return a, nil
	}
}

func (h *host) open(a *actor) {
	defer h.bg.Done()
	ctx, cancel := context.WithTimeout(h.ctx, openTimeout)
	defer cancel()
	var db *actorDB
	var err error
	select {
	case h.opening <- struct{}{}:
		db, err = openActor(ctx, h, a.key)
		<-h.opening
	case <-ctx.Done():
		err = ctx.Err()
	}
	h.mu.Lock()
	a.db, a.err = db, err
	if err != nil {
		if h.actors[a.key] == a {
			delete(h.actors, a.key)
		}
		a.closing = true
		close(a.gone)
	}
	a.lastUsed = time.Now()
	h.mu.Unlock()
	close(a.ready)
}

// release gives back a reference taken by acquire.
func (h *host) release(a *actor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a.refs--
	a.lastUsed = time.Now()
	if a.refs == 0 && a.dropped && a.err == nil {
		h.closeLocked(a)
	}
}

// drop takes an actor whose database stopped (fenced, replication
// stopped) out of service: it is closed once the requests using it are
// done, and the next request opens it anew (or finds it elsewhere).
func (h *host) drop(a *actor, why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !a.dropped {
		h.log.Warn("dropping actor", logNamespace, a.key.ns, logActor, a.key.id, logErr, why)
	}
	a.dropped = true
	if a.refs == 0 {
		h.closeLocked(a)
	}
}

// closeLocked starts closing an open actor, once. Called with h.mu held.
func (h *host) closeLocked(a *actor) {
	if a.closing {
		return
	}
	a.closing = true
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), closeTimeout)
		defer cancel()
		err := a.db.close(ctx)
		h.mu.Lock()
		if h.actors[a.key] == a {
			delete(h.actors, a.key)
		}
		a.closeErr = err
		h.mu.Unlock()
		close(a.gone)
	}()
}

// tickLoop hibernates idle actors until the host stops.
func (h *host) tickLoop() {
	every := min(max(h.cfg.idle/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.tick(time.Now())
	}
}

func (h *host) tick(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return
	}
	for _, a := range h.actors {
		select {
		case <-a.ready:
		default:
			continue // still opening
		}
		if a.err != nil || a.closing {
			continue
		}
		if a.refs == 0 && now.Sub(a.lastUsed) >= h.cfg.idle {
			h.log.Debug("hibernating idle actor", logNamespace, a.key.ns, logActor, a.key.id, logEpoch, a.db.epoch)
			h.closeLocked(a)
		}
	}
}

// actorStatus is one line of GET /status.
type actorStatus struct {
	Namespace string     `json:"namespace"`
	ID        string     `json:"id"`
	Epoch     uint64     `json:"epoch"`
	State     string     `json:"state"`
	Requests  int        `json:"requests"`
	IdleFor   float64    `json:"idle_seconds"`
	Durable   frames.Seq `json:"durable_seq"`
	Captured  frames.Seq `json:"captured_seq"`
	Stopped   string     `json:"stopped,omitempty"`
}

func (h *host) actorStatuses() []actorStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]actorStatus, 0, len(h.actors))
	now := time.Now()
	for _, a := range h.actors {
		s := actorStatus{Namespace: a.key.ns, ID: a.key.id, Requests: a.refs, State: "opening"}
		select {
		case <-a.ready:
			s.State = "open"
		default:
			out = append(out, s)
			continue
		}
		if a.err != nil {
			continue
		}
		if a.closing {
			s.State = "closing"
		}
		if a.refs == 0 {
			s.IdleFor = now.Sub(a.lastUsed).Seconds()
		}
		st := a.db.vfs.Stats()
		s.Epoch, s.Durable, s.Captured = a.db.epoch, st.Durable, st.Captured
		if st.Stopped != nil {
			s.Stopped = st.Stopped.Error()
		}
		out = append(out, s)
	}
	return out
}
