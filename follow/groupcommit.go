package follow

import (
	"maps"
	"slices"
	"time"
)

// GroupCommit is the owner's rule for sending Appends: at most one Append
// in flight to each follower, the ones the owner makes meanwhile merged
// into one that goes when the answer comes. A follower then makes its
// state durable once per round trip, whatever the commit rate: group
// commit at the follower ("Group commit" in the package documentation).
// Like Owner it does no I/O and takes time as an argument; it stands
// between Owner.Outbox and the transport. Not safe for concurrent use.
type GroupCommit struct {
	retransmit time.Duration
	windows    map[FollowerID]*window
}

// window is what GroupCommit knows of one follower.
type window struct {
	inflight bool      // an Append went and has had no answer
	since    time.Time // when it went
	held     *Append   // what goes when the answer comes; nil: nothing
}

// NewGroupCommit returns the rule for an owner that retransmits after
// retransmit (OwnerConfig.Retransmit; DefaultRetransmit when zero): an
// Append with no answer that long frees its follower's window, as the
// owner sends what it lacks again then anyway.
func NewGroupCommit(retransmit time.Duration) *GroupCommit {
	if retransmit <= 0 {
		retransmit = DefaultRetransmit
	}
	return &GroupCommit{retransmit: retransmit, windows: map[FollowerID]*window{}}
}

// Route takes what the owner queued (Owner.Outbox) and returns what goes
// now; it holds the rest. An Append goes if none is in flight to its
// follower; otherwise it is merged into the one held (it extends it: same
// epoch, Prev where the held one ends), or replaces it (a retransmission
// from an earlier point, which covers it or starts it over). A reset goes
// at once and drops what was held, which it carries. Messages other than
// Appends go at once. out is reused for the result.
func (g *GroupCommit) Route(out []Envelope, now time.Time) []Envelope {
	send := out[:0]
	for _, e := range out {
		m, ok := e.Msg.(*Append)
		if !ok {
			send = append(send, e)
			continue
		}
		w := g.windows[e.To]
		if w == nil {
			w = &window{}
			g.windows[e.To] = w
		}
		switch {
		case m.Reset:
			w.held = nil
			w.inflight, w.since = true, now
			send = append(send, e)
		case !w.inflight:
			w.inflight, w.since = true, now
			send = append(send, e)
		case w.held == nil:
			w.held = cloneAppend(m)
		case extends(w.held, m):
			w.held.Entries = append(w.held.Entries, m.Entries...)
			w.held.Durable = m.Durable
		default:
			w.held = cloneAppend(m)
		}
	}
	return send
}

// Receive takes a follower's reply, before Owner.Receive does: an Ack or a
// Refuse frees from's window. It returns what the window held, to send
// before what the owner queues in answer.
func (g *GroupCommit) Receive(from FollowerID, m Message, now time.Time) []Envelope {
	switch m.(type) {
	case *Ack, *Refuse:
	default:
		return nil
	}
	w := g.windows[from]
	if w == nil {
		return nil
	}
	w.inflight = false
	return w.release(from, now)
}

// Tick lets time pass, before Owner.Tick does: a window whose Append has
// had no answer for the retransmit interval (the Append or its answer was
// lost) is freed. It returns what those windows held, in follower order.
func (g *GroupCommit) Tick(now time.Time) []Envelope {
	var out []Envelope
	for _, id := range slices.Sorted(maps.Keys(g.windows)) {
		if w := g.windows[id]; w.inflight && now.Sub(w.since) >= g.retransmit {
			w.inflight = false
			out = append(out, w.release(id, now)...)
		}
	}
	return out
}

// Forget drops what GroupCommit knows of a follower the owner no longer
// sends to (it left the set, or a change that brought it was cancelled).
func (g *GroupCommit) Forget(id FollowerID) { delete(g.windows, id) }

// release sends what w holds, which is then in flight.
func (w *window) release(id FollowerID, now time.Time) []Envelope {
	if w.held == nil {
		return nil
	}
	m := w.held
	w.held, w.inflight, w.since = nil, true, now
	return []Envelope{{To: id, Msg: m}}
}

// extends reports whether m continues held: same epoch, Prev where held
// ends. The two merged are the Append the owner would have made had it
// sent once.
func extends(held, m *Append) bool {
	return m.Epoch == held.Epoch && m.Prev == endOf(held.Prev, held.Entries)
}

// cloneAppend copies m and its list of entries (not their bodies): the
// owner's Appends share its log, which merging must not write into.
func cloneAppend(m *Append) *Append {
	c := *m
	c.Entries = slices.Clone(m.Entries)
	return &c
}
