package peer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/logattr"
)

// hearing is what a node knows of how recently it heard from one peer
// (doc.go, "Failure detection"). Times are the node's monotonic clock.
type hearing struct {
	watched time.Time // since when it wants to hear from the peer: its first connection, or Watch
	last    time.Time // the last frame from it, of any kind; zero: none yet
	// back is when the peer was heard again after a silence of
	// SuspectAfter or more: it stays suspected until TrustAfter later.
	back time.Time
}

// Verdict is what an observer says of a peer: how long it has not heard
// from it. Known is false when the observer never wanted to hear from it
// (no connection ever, no Watch): then Silence means nothing.
type Verdict struct {
	Known   bool
	Silence time.Duration
	// Suspected: Known, and silent for Config.SuspectAfter or more, or
	// heard again less than Config.TrustAfter after such a silence.
	// Set by Node.Silence; an answer from another node carries Silence
	// only, which the asker judges by its own settings (Node.Ask).
	Suspected bool
}

// heardLocked records a frame from peer id at now. n.mu held.
func (n *Node) heardLocked(id follow.FollowerID, now time.Time) {
	h := n.hear[id]
	if h == nil {
		h = &hearing{watched: now}
		n.hear[id] = h
	}
	silent := h.last
	if silent.IsZero() {
		silent = h.watched
	}
	if now.Sub(silent) >= n.s.suspectAfter && !h.last.IsZero() {
		h.back = now
	}
	h.last = now
}

// watchLocked starts wanting to hear from id, if the node did not yet.
// n.mu held.
func (n *Node) watchLocked(id follow.FollowerID, now time.Time) {
	if n.hear[id] == nil {
		n.hear[id] = &hearing{watched: now}
	}
}

// Watch makes the node want to hear from peer id: it dials it (at the
// address SetAddr gave) if it has no connection with it, and from then on
// Silence counts the time nothing came from it. A peer is watched from
// its first connection anyway; Watch is for one the node never talked to,
// such as the owner of an actor this node forwards requests to. It fails
// like Send when the node has neither a connection nor an address.
func (n *Node) Watch(id follow.FollowerID) error {
	if id == n.s.id {
		return fmt.Errorf("%w: node %s watching itself", ErrInvalid, id)
	}
	n.mu.Lock()
	n.watchLocked(id, time.Now())
	p := n.peers[id]
	connected := p != nil && len(p.conns) > 0
	n.mu.Unlock()
	if connected {
		return nil
	}
	// A heartbeat through the queue dials, and then beats keep going.
	return n.enqueue(id, appendControl(nil, control{kind: controlHeartbeat}))
}

// Silence says how long this node has not heard from peer id (see
// Verdict). While a connection with the peer holds a message its Handler
// has not taken yet (Config.Handler is slow, its queue full), the peer
// counts as heard: the silence is this node's own.
func (n *Node) Silence(id follow.FollowerID) Verdict {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	// A closed node hears nobody, so every peer's silence is its own: it
	// has no opinion (Known false). Otherwise a node whose transport was
	// closed while it serves (Host.CutPeers) suspected every holder it
	// forwards to, and each request spent its whole timeout retrying a
	// claim on suspicion that no follower can ever confirm through a
	// closed transport, instead of being forwarded to the live holder.
	h := n.hear[id]
	if h == nil || n.closed {
		return Verdict{}
	}
	if p := n.peers[id]; p != nil {
		for _, c := range p.conns {
			if c.held.Load() {
				n.heardLocked(id, now)
			}
		}
	}
	from := h.last
	if from.IsZero() {
		from = h.watched
	}
	v := Verdict{Known: true, Silence: now.Sub(from)}
	v.Suspected = v.Silence >= n.s.suspectAfter || !h.back.IsZero() && now.Sub(h.back) < n.s.trustAfter
	return v
}

// SuspectAfter is the silence past which this node suspects a peer
// (Config.SuspectAfter).
func (n *Node) SuspectAfter() time.Duration { return n.s.suspectAfter }

// Ask asks peer observer how long it has not heard from subject, and
// waits for the answer until ctx ends. The answer's Suspected is judged
// by this node's Config.SuspectAfter. It fails like Send when observer
// cannot be reached at all, and with ctx's error when no answer came.
func (n *Node) Ask(ctx context.Context, observer, subject follow.FollowerID) (Verdict, error) {
	if err := checkID(subject); err != nil {
		return Verdict{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var idb [8]byte
	rand.Read(idb[:])
	id := binary.LittleEndian.Uint64(idb[:])
	ch := make(chan control, 1)
	n.mu.Lock()
	n.asks[id] = pendingAsk{observer: observer, subject: subject, answer: ch}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.asks, id)
		n.mu.Unlock()
	}()
	if err := n.enqueue(observer, appendControl(nil, control{kind: controlAsk, query: id, subject: subject})); err != nil {
		return Verdict{}, err
	}
	select {
	case a := <-ch:
		return Verdict{Known: a.known, Silence: a.silence, Suspected: a.known && a.silence >= n.s.suspectAfter}, nil
	case <-ctx.Done():
		return Verdict{}, fmt.Errorf("peer: asking %s about %s: %w", observer, subject, ctx.Err())
	case <-n.ctx.Done():
		return Verdict{}, ErrClosed
	}
}

// pendingAsk is a question Ask waits on.
type pendingAsk struct {
	observer, subject follow.FollowerID
	answer            chan control
}

// onControl acts on a control frame from peer from: a heartbeat only
// counts as hearing from it (the reader did that), a question is
// answered, an answer goes to the Ask that waits for it (one nobody waits
// for, or from another peer than the one asked, is dropped).
func (n *Node) onControl(from follow.FollowerID, c control) {
	switch c.kind {
	case controlAsk:
		v := n.Silence(c.subject)
		a := control{kind: controlAnswer, query: c.query, subject: c.subject, known: v.Known, silence: v.Silence}
		if c.subject == n.s.id {
			a.known, a.silence = true, 0 // it hears itself
		}
		if err := n.enqueue(from, appendControl(nil, a)); err != nil {
			n.s.log.Debug("cannot answer a question", logattr.Peer, string(from), logattr.Err, err)
		}
	case controlAnswer:
		n.mu.Lock()
		p, ok := n.asks[c.query]
		n.mu.Unlock()
		if ok && p.observer == from && p.subject == c.subject {
			select {
			case p.answer <- c:
			default:
			}
		}
	}
}

// beatLoop sends a heartbeat every Config.Heartbeat on each connection
// that carried nothing for that long, written beside the queue (never
// behind it), and skips one whose writer is busy: a frame going out says
// as much. It also forgets what it heard of peers it has had nothing to
// do with for hearingKept.
func (n *Node) beatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.s.heartbeat)
	defer t.Stop()
	beat := appendControl(nil, control{kind: controlHeartbeat})
	for {
		select {
		case <-t.C:
		case <-n.ctx.Done():
			return
		}
		now := time.Now()
		var conns []*Conn
		n.mu.Lock()
		for _, p := range n.peers {
			conns = append(conns, p.conns...)
		}
		for id, h := range n.hear {
			latest := h.watched
			if h.last.After(latest) {
				latest = h.last
			}
			if n.peers[id] == nil && now.Sub(latest) > hearingKept {
				delete(n.hear, id)
			}
		}
		n.mu.Unlock()
		for _, c := range conns {
			if now.UnixNano()-c.lastWrite.Load() < int64(n.s.heartbeat) || !c.wmu.TryLock() {
				continue
			}
			err := c.sendLocked(beat)
			c.wmu.Unlock()
			if err != nil {
				c.Close() // the reader detaches it
			}
		}
	}
}

// hearingKept is how long a node remembers hearing from a peer it has no
// connection with any more: long enough for any claim that asks about it.
const hearingKept = 10 * time.Minute
