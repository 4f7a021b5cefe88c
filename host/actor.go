package host

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/quorum"
)

// actorKey names an actor in the host's map.
type actorKey struct{ ns, id string }

func (k actorKey) String() string { return k.ns + "/" + frames.ActorKey([]byte(k.id)) }

// Actor is one actor the host has: its replicated database for one
// session (one ownership epoch) and what the runtime keeps beside it. Every
// Handle of the actor shares it; a new session is a new Actor.
//
// Its states, under Host.mu: Queued and Opening (in the map, ready not
// closed: Acquires wait for ready), Open (Acquires take a Handle), Closing
// (drop or hibernation: Acquires wait for gone, then open it anew), then
// out of the map with gone closed. A failed open leaves the map at once,
// so the next Acquire tries again.
type Actor struct {
	h   *Host
	key actorKey
	dir string

	// Written by the open goroutine before ready is closed (and before
	// state becomes Open under Host.mu), read-only afterwards.
	db     *framectl.DB
	peers  *quorum.Session // db's followers (session.Config.Peers); nil without Config.Peers
	node   *fence.Node     // the node the session was claimed with
	unlock func()          // the actor directory's lock
	err    error           // why the open failed
	value  any

	ready chan struct{} // closed once the open ended (db or err set)
	gone  chan struct{} // closed once out of the map (closed, or failed)

	// stale is the stopped session Reopen continues (node lost), and
	// peers is set to its followers' session, which Reopen uses again;
	// only the open goroutine touches stale.
	stale *framectl.DB
	// claimBeforeStop: the last open attempt began before the host
	// stopped claiming, so its claim may have taken the actor from
	// someone. Written by the open goroutine, read by it under Host.mu.
	claimBeforeStop bool

	// alarm is the session's alarm (package alarm), which the host tells
	// where the actor is in its lifecycle. Set by newActorLocked.
	alarm *alarm.Session

	// Guarded by Host.mu.
	state      State
	refs       int       // Handles not released, and Acquires waiting for the open
	lastUsed   time.Time // when the last Handle was released (or the open ended)
	drop       bool      // close once unused; the next Acquire opens it anew
	reopen     bool      // after closing, Reopen on the host's next node
	retryUntil time.Time // keep retrying the claim until then, even with nobody waiting
	lastErr    error     // the last claim attempt's error, while retrying
	closeErr   error     // set before gone is closed
	refused    bool      // claimed as the drain began: never handed out (drop is set too)
}

// Namespace returns the actor's namespace.
func (a *Actor) Namespace() string { return a.key.ns }

// ID returns the actor's ID.
func (a *Actor) ID() []byte { return []byte(a.key.id) }

// DB returns the actor's replicated database. Open connections with its
// DSN or Conn in Hooks.Opened and close them in Hooks.Closing; hold every
// reply until DB.Durable returns nil (the output gate).
func (a *Actor) DB() *framectl.DB { return a.db }

// Epoch returns the session's ownership epoch.
func (a *Actor) Epoch() frames.Epoch { return a.db.Epoch() }

// Value returns what Hooks.Opened stored with SetValue.
func (a *Actor) Value() any { return a.value }

// SetValue stores what the runtime keeps per open actor (a connection
// pool, in-memory state). Call it only from Hooks.Opened: every Acquire
// returns after Opened did, so they all see it.
func (a *Actor) SetValue(v any) { a.value = v }

func (a *Actor) String() string { return a.key.String() }

// Handle is one use of an open actor, from Acquire until Release. The
// actor is not closed for being idle while a Handle of it is out.
type Handle struct {
	*Actor
	released atomic.Bool
}

// Release ends this use of the actor. Only the first call counts.
func (hd *Handle) Release() {
	if hd.released.Swap(true) {
		return
	}
	hd.h.release(hd.Actor)
}

// Acquire returns a Handle of the actor, opening it first if this host
// does not have it open: concurrent Acquires of one actor share one open.
// Opening claims the actor for this node (the next epoch), brings the
// local copy up to date (session.Open) and runs Hooks.Opened.
//
// When a live node elsewhere holds the actor, the error is a
// *fence.HeldError naming it (errors.As): forward the request there.
// Claims that must wait for a dead holder's lease to run out are retried
// with backoff until ctx ends; the error then matches ctx's error and the
// last attempt's (fence.ErrHolderUnseen, ErrLocked, fence.ErrHeld). After
// Close, or once the node was lost with Config.StopOnNodeLoss, the error
// matches ErrStopped.
func (h *Host) Acquire(ctx context.Context, namespace string, actor []byte) (*Handle, error) {
	if len(actor) == 0 || len(actor) > frames.MaxActorIDBytes {
		return nil, fmt.Errorf("%w: %d bytes, not 1 to %d", ErrBadActorID, len(actor), frames.MaxActorIDBytes)
	}
	key := actorKey{namespace, string(actor)}
	for {
		h.mu.Lock()
		if err := h.stopErr; err != nil {
			h.mu.Unlock()
			return nil, err
		}
		a := h.actors[key]
		if a != nil && a.state == Open && !a.drop {
			if why := a.unusable(); why != nil {
				h.dropLocked(a, why)
			}
		}
		if a != nil && (a.state == Closing || a.drop) {
			// Its close (and release) must land before the next claim,
			// or that claim would find own.json naming this node at the
			// old epoch. A dropped actor closes once its last Handle is
			// released.
			gone := a.gone
			h.mu.Unlock()
			select {
			case <-gone:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("host: acquiring %s: %w", key, ctx.Err())
			}
		}
		if a == nil {
			a = h.newActorLocked(key, nil, time.Time{})
		}
		a.refs++
		h.mu.Unlock()

		select {
		case <-a.ready:
		case <-ctx.Done():
			h.mu.Lock()
			last := a.lastErr
			h.mu.Unlock()
			h.release(a)
			if last != nil {
				return nil, fmt.Errorf("host: acquiring %s: %w (last attempt: %w)", key, ctx.Err(), last)
			}
			return nil, fmt.Errorf("host: acquiring %s: %w", key, ctx.Err())
		}
		if a.err != nil {
			h.release(a)
			return nil, a.err
		}
		// Checked again right before handing it out: Close may have begun
		// while it opened, and nothing would then close it; a drain may
		// have begun while it was claimed, and nothing would drain it.
		h.mu.Lock()
		err := h.stopErr
		if err == nil && a.refused {
			err = fmt.Errorf("%w: %s was claimed as the drain began", ErrDraining, key)
		}
		h.mu.Unlock()
		if err != nil {
			h.release(a)
			return nil, err
		}
		return &Handle{Actor: a}, nil
	}
}

// newActorLocked puts a new actor in the map and starts opening it: with
// Reopen of prev's stopped session if prev is not nil, retrying claims
// until retryUntil even if nobody waits. Called with h.mu held.
func (h *Host) newActorLocked(key actorKey, prev *Actor, retryUntil time.Time) *Actor {
	a := &Actor{
		h:          h,
		key:        key,
		dir:        h.actorDir(key),
		ready:      make(chan struct{}),
		gone:       make(chan struct{}),
		state:      Queued,
		retryUntil: retryUntil,
	}
	if prev != nil {
		a.stale, a.peers = prev.db, prev.peers
	}
	a.alarm = h.alarms.NewSession(alarm.Key{Namespace: key.ns, ID: key.id}, actorForAlarm{a})
	h.actors[key] = a
	h.bg.Add(1)
	go h.open(a)
	return a
}

// unusable says why an open actor must not be handed out any more: its
// database stopped (fenced, its node lost, replication stopped) or its
// node is past its lease. Called with h.mu held (it takes no host lock).
func (a *Actor) unusable() error {
	if err := a.db.Stats().Stopped; err != nil {
		return err
	}
	return a.node.Valid()
}

// release gives back a Handle, or an Acquire's wait for an open.
func (h *Host) release(a *Actor) { h.releaseUse(a, true) }

// releaseUse gives back a use; one of the alarms' (a settle, a look at
// the alarm that ran nothing) is not a use of the actor's, and does not
// keep it from hibernating.
func (h *Host) releaseUse(a *Actor, touch bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a.refs--
	if touch {
		a.lastUsed = h.clock.Now()
	}
	// Whoever wrote the alarm has released it, most likely after Durable:
	// its Session deletes what that made stale, holding a use meanwhile.
	if a.alarm.Released() {
		a.refs++
		return
	}
	if a.refs > 0 || a.state != Open {
		return
	}
	if !a.drop && h.stopErr == nil {
		if why := a.unusable(); why != nil {
			h.dropLocked(a, why)
			return
		}
	}
	if a.drop || h.stopErr != nil {
		h.closeLocked(a, "released")
	}
}

// dropLocked takes an actor out of service: it closes once unused, and the
// next Acquire opens it anew, or, if it stopped because its node was lost
// and the host recovers, reopens it on the next node. Called with h.mu
// held.
func (h *Host) dropLocked(a *Actor, why error) {
	if a.drop {
		return
	}
	a.drop = true
	a.alarm.Closing()
	h.stats.dropped(why)
	nodeErr := a.node.Err()
	a.reopen = !h.cfg.StopOnNodeLoss && nodeErr != nil && !errors.Is(nodeErr, fence.ErrClosed)
	h.log.Warn("dropping actor", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)),
		logattr.Epoch, a.db.Epoch(), "reopen", a.reopen, logattr.Why, why)
	if a.refs == 0 {
		h.closeLocked(a, "dropped")
	}
}

// closeLocked starts closing an open actor, once. Called with h.mu held.
func (h *Host) closeLocked(a *Actor, why string) {
	if a.state != Open {
		return
	}
	a.state = Closing
	a.alarm.Closing()
	h.bg.Add(1)
	go h.close(a, why)
}

// close runs Hooks.Closing, closes the database (final flush, release of
// own.json), unlocks the directory and takes the actor out of the map. An
// actor to reopen keeps its stopped database for Reopen instead, in a new
// entry that opens it on the host's next node.
func (h *Host) close(a *Actor, why string) {
	defer h.bg.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), closeTimeout)
	defer cancel()
	if hook := h.cfg.Hooks.Closing; hook != nil {
		hook(ctx, a)
	}
	h.mu.Lock()
	reopen := a.reopen && h.stopErr == nil
	h.mu.Unlock()
	var wakeAt time.Time
	if !reopen && a.db.Stats().Stopped == nil {
		// Nothing writes the alarm any more: entries of sets that never
		// committed are stale too.
		wakeAt = a.alarm.Finish(ctx, why == whyIdle)
	}
	a.alarm.Disconnect()
	var err error
	if !reopen {
		err = a.db.Close(ctx)
	}
	a.unlock()

	h.mu.Lock()
	if h.actors[a.key] == a {
		delete(h.actors, a.key)
	}
	// Its counts stay in Stats' sums: closed, or stopped for a Reopen, it
	// acknowledges nothing more.
	h.stats.closed.retire(a.db.Stats())
	a.closeErr = err
	a.state = 0
	a.alarm.Gone(wakeAt)
	var orphan *framectl.DB
	switch {
	case reopen && h.stopErr == nil:
		// Nobody may be waiting: retry until the old node's lease has
		// surely run out on the next node's clock, and a bit more.
		h.newActorLocked(a.key, a, h.clock.Now().Add(recoverWindow(h.cfg)))
	case reopen:
		orphan = a.db // stopped while it waited for the next node
	}
	h.mu.Unlock()
	if orphan != nil {
		err = orphan.Close(ctx)
		h.mu.Lock()
		a.closeErr = err
		h.mu.Unlock()
	}
	close(a.gone)
	level := h.log.Info
	if err != nil && a.node.Err() == nil {
		level = h.log.Warn
	}
	level("actor closed", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)),
		logattr.Epoch, a.db.Epoch(), logattr.Why, why, "reopen", reopen, logattr.Err, err)
}

// recoverWindow is how long a reopen after a lost node keeps retrying its
// claim with nobody waiting: the old node's lease plus grace, on the new
// node's clock, from when it first looked, twice over, and a minute.
func recoverWindow(cfg Config) time.Duration {
	return 2*(cfg.Lease+cfg.Grace) + time.Minute
}
