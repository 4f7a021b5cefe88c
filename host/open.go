package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/session"
)

// Backoff between claim attempts that wait for a dead holder's lease to
// run out. Lease+Grace is seconds; a second's granularity costs at most a
// second of the wait, and each attempt is a few small bucket requests.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// errDeserted: an open was given up before it started because nobody was
// waiting for it any more.
var errDeserted = errors.New("host: nobody waits for this open any more")

// open opens a new entry, retrying claims that will succeed once a dead
// holder's lease has run out, for as long as someone waits for it (or
// until retryUntil), then publishes the outcome.
func (h *Host) open(a *Actor) {
	defer h.bg.Done()
	err := h.openRetrying(a)
	h.mu.Lock()
	a.err = err
	if err != nil {
		if h.actors[a.key] == a {
			delete(h.actors, a.key)
		}
		a.state = 0
		a.alarm.Gone(time.Time{})
		close(a.gone)
	} else if h.draining && a.claimBeforeStop && h.stopErr == nil {
		// Claimed while the drain began: handed to no one (the Acquires
		// waiting for it fail with ErrDraining), closed and released at
		// once, so that a peer claims it.
		a.state, a.drop, a.refused = Open, true, true
		a.lastUsed = h.clock.Now()
		h.log.Info("refusing an actor claimed as the drain began", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)),
			logattr.Epoch, a.db.Epoch())
		if a.refs == 0 {
			h.closeLocked(a, whyRefused)
		}
	} else {
		a.state = Open
		a.lastUsed = h.clock.Now()
		a.alarm.Opened()
		if a.refs == 0 && h.stopErr != nil {
			h.closeLocked(a, "host closing")
		}
	}
	h.mu.Unlock()
	close(a.ready)
	if a.stale != nil {
		// Never reopened (the host stopped first): close the stopped
		// session.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), closeTimeout)
		a.stale.Close(ctx)
		cancel()
	}
}

func (h *Host) openRetrying(a *Actor) error {
	delay := retryMin
	for {
		err := h.openOnce(a)
		h.stats.claimed(err)
		if err == nil || !h.retryable(err) {
			return err
		}
		h.mu.Lock()
		a.lastErr = err
		keep := h.stopErr == nil && (a.refs > 0 || h.clock.Now().Before(a.retryUntil))
		h.mu.Unlock()
		if !keep {
			return err
		}
		h.log.Debug("cannot claim yet; retrying", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, err)
		// Jittered, so that the claimants of many actors do not move in
		// step.
		wait := delay/2 + rand.N(delay/2+1)
		select {
		case <-h.ctx.Done():
			return fmt.Errorf("%w: %w", ErrStopped, err)
		case <-h.clock.After(wait):
		}
		if held := (*fence.HeldError)(nil); errors.As(err, &held) {
			delay = h.nextRetry(held, delay)
		} else {
			delay = min(2*delay, retryMax)
		}
	}
}

// openOnce is one attempt: wait for a live node and an open slot, lock the
// directory, claim and open the database (Reopen a stopped session), run
// Hooks.Opened.
func (h *Host) openOnce(a *Actor) error {
	node, draining, err := h.liveNode()
	if err != nil {
		return err
	}
	// A claim that looks at own.json before the node stops claiming may
	// take the actor from someone while the drain begins: its open is
	// refused once it ends (see open). One that looks after it can only
	// take what own.json gives this node already.
	a.claimBeforeStop = !draining
	select {
	case h.opening <- struct{}{}:
	case <-h.ctx.Done():
		return ErrStopped
	}
	defer func() { <-h.opening }()
	h.mu.Lock()
	deserted := a.refs == 0 && !h.clock.Now().Before(a.retryUntil)
	if !deserted {
		a.state = Opening
	}
	h.mu.Unlock()
	if deserted {
		return errDeserted
	}
	ctx, cancel := context.WithTimeout(h.ctx, openTimeout)
	defer cancel()
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return fmt.Errorf("host: opening %s: %w", a, err)
	}
	unlock, err := lockDir(a.dir)
	if err != nil {
		return fmt.Errorf("host: opening %s: %w", a, err)
	}
	var db *framectl.DB
	peers := a.peers // the stale session's, which Reopen continues
	if stale := a.stale; stale != nil {
		a.stale = nil // closed by Reopen, whatever it returns
		db, err = stale.Reopen(ctx, node)
	} else {
		peers = h.newSession(a)
		db, err = framectl.Open(ctx, h.vfsConfig(a, node, peers))
	}
	if err != nil {
		unlock()
		h.setQueued(a)
		if errors.Is(err, fence.ErrNotClaiming) {
			return fmt.Errorf("%w: opening %s: %w", ErrDraining, a, err)
		}
		return fmt.Errorf("host: opening %s: %w", a, err)
	}
	a.db, a.peers, a.node, a.unlock = db, peers, node, unlock
	if err := a.alarm.Index(ctx); err != nil {
		a.alarm.Disconnect()
		if cerr := db.Close(context.WithoutCancel(ctx)); cerr != nil {
			h.log.Warn("closing after indexing its alarm failed", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, cerr)
		}
		unlock()
		return fmt.Errorf("host: opening %s: indexing its alarm: %w", a, err)
	}
	if hook := h.cfg.Hooks.Opened; hook != nil {
		if err := hook(ctx, a); err != nil {
			a.alarm.Disconnect()
			if cerr := db.Close(context.WithoutCancel(ctx)); cerr != nil {
				h.log.Warn("closing after Hooks.Opened failed", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, cerr)
			}
			unlock()
			return fmt.Errorf("host: opening %s: Hooks.Opened: %w", a, err)
		}
	}
	h.log.Info("actor open", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Epoch, db.Epoch(),
		"from", db.Stats().Start.From)
	return nil
}

// setQueued marks an actor waiting for its next attempt.
func (h *Host) setQueued(a *Actor) {
	h.mu.Lock()
	a.state = Queued
	h.mu.Unlock()
}

// vfsConfig is the configuration of a's database, claimed with node, its
// followers peers (nil: none, bucket only).
func (h *Host) vfsConfig(a *Actor, node *fence.Node, peers *quorum.Session) session.Config {
	cfg := h.cfg.VFS
	cfg.Bucket = h.cfg.Bucket
	cfg.Namespace = a.key.ns
	cfg.Actor = []byte(a.key.id)
	cfg.Node = node
	cfg.Dir = a.dir
	if peers != nil { // a nil *quorum.Session is not a nil session.Peers
		cfg.Peers = peers
	}
	if h.peers != nil {
		cfg.Suspect = h.peers.suspicion.Confirm
	}
	return cfg
}

// liveNode returns the node to claim with, waiting while a new one is
// being registered after a loss, and whether the host was draining then
// (the node had stopped claiming).
func (h *Host) liveNode() (*fence.Node, bool, error) {
	for {
		h.mu.Lock()
		if err := h.stopErr; err != nil {
			h.mu.Unlock()
			return nil, false, err
		}
		n, recovering, draining := h.node, h.recovered, h.draining
		h.mu.Unlock()
		if recovering != nil {
			select {
			case <-recovering:
				continue
			case <-h.ctx.Done():
				return nil, false, ErrStopped
			}
		}
		// Past its lease: Valid ends the node, and watchNode registers
		// the next one; the caller retries.
		if err := n.Valid(); err != nil {
			return nil, false, err
		}
		return n, draining, nil
	}
}

// retryable reports whether a failed open will succeed once a dead
// holder's lease has run out (or the host's next node is registered).
func (h *Host) retryable(err error) bool {
	switch {
	case errors.Is(err, errDeserted), errors.Is(err, ErrStopped), errors.Is(err, ErrDraining):
		return false
	case errors.Is(err, fence.ErrHolderUnseen), errors.Is(err, ErrLocked):
		return true
	case errors.Is(err, fence.ErrLeaseLost), errors.Is(err, fence.ErrFenced):
		// This node was lost during the attempt; the next one claims.
		return !h.cfg.StopOnNodeLoss
	}
	var held *fence.HeldError
	if !errors.As(err, &held) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, earlier := h.earlier[held.Node]
	until, suspect := h.suspects[held.Node]
	// A holder at this node's address is a predecessor of this process
	// (two live processes cannot serve one address): forwarding there
	// would reach this process, so wait for its lease instead.
	return earlier || held.Address == h.cfg.Address || suspect && h.clock.Now().Before(until)
}

// suspectRetry is the longest wait between claims of an actor whose
// holder this node's failure detection watches and suspects: the claim
// can succeed as soon as a follower confirms (quorum.Suspicion), a
// fraction of peer.DefaultSuspectAfter after the first suspicion.
const suspectRetry = 100 * time.Millisecond

// nextRetry is the wait after delay before the next claim of an actor
// held by held: doubling up to retryMax, or at most suspectRetry while
// the holder is a suspect in peer mode.
func (h *Host) nextRetry(held *fence.HeldError, delay time.Duration) time.Duration {
	next := min(2*delay, retryMax)
	if h.peers == nil {
		return next
	}
	h.mu.Lock()
	until, suspect := h.suspects[held.Node]
	h.mu.Unlock()
	if suspect && h.clock.Now().Before(until) {
		return min(next, suspectRetry)
	}
	return next
}

// suspect records that a holder did not accept a connection: for
// Lease+Grace, claims held by it are retried rather than forwarded, since
// its lease will run out unless it is alive (then the claim keeps failing
// until the mark ends, and requests are forwarded again).
func (h *Host) suspect(node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	for id, until := range h.suspects {
		if !now.Before(until) {
			delete(h.suspects, id)
		}
	}
	h.suspects[node] = now.Add(h.cfg.Lease + h.cfg.Grace)
}
