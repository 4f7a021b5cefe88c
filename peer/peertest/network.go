// Package peertest is for tests only: a fault-injecting network of
// peer.Transports. Network wraps each node's transport (a peer.Node over
// real TCP, or anything else with Send) and its Handler, and between them
// drops, delays, copies and reorders messages, and cuts pairs of nodes
// apart, as the rules say at the moment (they change at runtime). These
// are the faults follow's simulation throws at the protocol; here they
// reach it through the real transport. It must never be imported outside
// tests.
package peertest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/peer"
)

// Rules say which faults a Network injects. Probabilities are from 0 to 1;
// the zero value injects nothing.
type Rules struct {
	// Drop is the probability that a message is lost.
	Drop float64
	// Duplicate is the probability that a message is sent twice.
	Duplicate float64
	// Reorder is the probability that a message is held back and sent
	// after the next message from the same node to the same peer (or
	// after HoldMax, if none comes).
	Reorder float64
	// HoldMax bounds how long Reorder holds a message; default 50 ms.
	HoldMax time.Duration
	// DelayMin and DelayMax delay every message by a uniformly random
	// duration between them (messages with different delays overtake each
	// other).
	DelayMin, DelayMax time.Duration
}

func (r Rules) check() error {
	for _, p := range []float64{r.Drop, r.Duplicate, r.Reorder} {
		if p < 0 || p > 1 {
			return fmt.Errorf("peertest: probability %v out of [0, 1]", p)
		}
	}
	if r.DelayMin < 0 || r.DelayMax < r.DelayMin || r.HoldMax < 0 {
		return fmt.Errorf("peertest: delays %v..%v, hold %v", r.DelayMin, r.DelayMax, r.HoldMax)
	}
	return nil
}

// Stats counts what a Network did.
type Stats struct {
	Sent        int // messages handed to the transport below (copies included)
	Dropped     int // lost by Drop
	Duplicated  int // sent twice
	Reordered   int // held back and sent after a later one
	Delayed     int // sent after a delay
	Partitioned int // lost to a partition, sending or receiving
	Failed      int // delayed or held messages the transport below refused
}

// Network is the faults between a set of nodes. Safe for concurrent use.
type Network struct {
	mu     sync.Mutex
	rng    *rand.Rand
	rules  Rules
	cut    map[pair]bool
	held   map[pair]*heldMsg
	timers map[*time.Timer]struct{}
	closed bool
	stats  Stats
}

// pair is a direction (cut holds both directions of a partition).
type pair struct{ from, to follow.FollowerID }

// msg is a message and the actor it is for, as Send took them.
type msg struct {
	actor string
	m     follow.Message
}

type heldMsg struct {
	msg
	next  peer.Transport
	timer *time.Timer
}

// New returns a network that injects nothing yet. seed makes its random
// draws reproducible for a given order of calls.
func New(seed uint64) *Network {
	return &Network{
		rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), cut: map[pair]bool{},
		held: map[pair]*heldMsg{}, timers: map[*time.Timer]struct{}{},
	}
}

// Set replaces the rules, from the next message on.
func (n *Network) Set(r Rules) error {
	if err := r.check(); err != nil {
		return err
	}
	n.mu.Lock()
	n.rules = r
	n.mu.Unlock()
	return nil
}

// Partition cuts a and b apart, both ways: what either sends the other is
// lost, and so is what arrives from the other (in flight when the cut
// came).
func (n *Network) Partition(a, b follow.FollowerID) {
	n.mu.Lock()
	n.cut[pair{a, b}], n.cut[pair{b, a}] = true, true
	n.mu.Unlock()
}

// Heal undoes Partition(a, b).
func (n *Network) Heal(a, b follow.FollowerID) {
	n.mu.Lock()
	delete(n.cut, pair{a, b})
	delete(n.cut, pair{b, a})
	n.mu.Unlock()
}

// HealAll undoes every partition.
func (n *Network) HealAll() {
	n.mu.Lock()
	clear(n.cut)
	n.mu.Unlock()
}

// Stats returns what the network did so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close stops every delay and hold: what they kept is lost. Sends after
// it fail with peer.ErrClosed.
func (n *Network) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for t := range n.timers {
		t.Stop()
	}
	clear(n.timers)
	for _, h := range n.held {
		h.timer.Stop()
	}
	clear(n.held)
}

// Transport returns node self's transport through the network: Send
// applies the rules, then hands the message to next.
func (n *Network) Transport(self follow.FollowerID, next peer.Transport) peer.Transport {
	return &transport{n: n, self: self, next: next}
}

// Handler returns node self's handler through the network: a message from
// a node cut from self is lost, the rest go to h.
func (n *Network) Handler(self follow.FollowerID, h peer.Handler) peer.Handler {
	return func(from follow.FollowerID, actor string, m follow.Message) {
		n.mu.Lock()
		cut := n.cut[pair{from, self}]
		if cut {
			n.stats.Partitioned++
		}
		n.mu.Unlock()
		if !cut {
			h(from, actor, m)
		}
	}
}

type transport struct {
	n    *Network
	self follow.FollowerID
	next peer.Transport
}

var _ peer.Transport = (*transport)(nil)

// Send loses, copies, holds or delays m, with its actor, as the rules draw
// (the rules are per pair of nodes, across actors, as one connection
// carries them all). A message sent at once returns what next.Send
// returned; a delayed one returns nil, and what next.Send returns later is
// counted (Stats.Failed), as a network would lose it.
func (t *transport) Send(to follow.FollowerID, actor string, m follow.Message) error {
	n := t.n
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return peer.ErrClosed
	}
	p := pair{t.self, to}
	if n.cut[p] {
		n.stats.Partitioned++
		n.mu.Unlock()
		return nil
	}
	r := n.rules
	if n.draw(r.Drop) {
		n.stats.Dropped++
		n.mu.Unlock()
		return nil
	}
	var out []msg
	for range 1 + btoi(n.draw(r.Duplicate)) {
		out = append(out, msg{actor, m})
	}
	if len(out) == 2 {
		n.stats.Duplicated++
	}
	if h := n.held[p]; h != nil && h.timer.Stop() {
		// The message held back goes after this one. (A hold whose timer
		// fired already is releaseHeld's.)
		delete(n.held, p)
		out = append(out, h.msg)
		n.stats.Reordered++
	} else if h == nil && n.draw(r.Reorder) {
		hold := r.HoldMax
		if hold == 0 {
			hold = 50 * time.Millisecond
		}
		h := &heldMsg{msg: msg{actor, m}, next: t.next}
		h.timer = time.AfterFunc(hold, func() { n.releaseHeld(p, h) })
		n.held[p] = h
		out = out[1:]
	}
	delays := make([]time.Duration, len(out))
	for i := range delays {
		delays[i] = n.delay(r)
	}
	n.mu.Unlock()

	var first error
	for i, o := range out {
		if err := t.deliver(to, o, delays[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pass reports whether a message held or delayed until now goes on from
// p.from to p.to, and counts it: Partitioned when the pair was cut
// meanwhile, else Sent. n.mu held.
func (n *Network) pass(p pair) bool {
	if n.cut[p] {
		n.stats.Partitioned++
		return false
	}
	n.stats.Sent++
	return true
}

// draw is true with probability p. n.mu held.
func (n *Network) draw(p float64) bool { return p > 0 && n.rng.Float64() < p }

// delay draws a delay. n.mu held.
func (n *Network) delay(r Rules) time.Duration {
	if r.DelayMax == 0 {
		return 0
	}
	return r.DelayMin + time.Duration(n.rng.Int64N(int64(r.DelayMax-r.DelayMin)+1))
}

// deliver hands m to the transport below, now or after d.
func (t *transport) deliver(to follow.FollowerID, m msg, d time.Duration) error {
	n := t.n
	if d == 0 {
		n.mu.Lock()
		n.stats.Sent++
		n.mu.Unlock()
		return t.next.Send(to, m.actor, m.m)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return peer.ErrClosed
	}
	n.stats.Delayed++
	var timer *time.Timer
	timer = time.AfterFunc(d, func() {
		n.mu.Lock()
		if _, live := n.timers[timer]; !live {
			n.mu.Unlock()
			return
		}
		delete(n.timers, timer)
		ok := n.pass(pair{t.self, to})
		n.mu.Unlock()
		if ok {
			n.sendLater(t.next, to, m)
		}
	})
	n.timers[timer] = struct{}{}
	return nil
}

// releaseHeld sends a held message whose hold ran out.
func (n *Network) releaseHeld(p pair, h *heldMsg) {
	n.mu.Lock()
	if n.held[p] != h {
		n.mu.Unlock()
		return
	}
	delete(n.held, p)
	ok := n.pass(p)
	n.mu.Unlock()
	if ok {
		n.sendLater(h.next, p.to, h.msg)
	}
}

// sendLater sends a message whose Send already returned: a refusal is
// counted (Stats.Failed), as the loss it is.
func (n *Network) sendLater(next peer.Transport, to follow.FollowerID, m msg) {
	if err := next.Send(to, m.actor, m.m); err != nil {
		n.mu.Lock()
		n.stats.Failed++
		n.mu.Unlock()
	}
}
