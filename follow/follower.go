package follow

import (
	"fmt"
	"slices"

	"github.com/framectl/framectl/frames"
)

// State is everything a follower keeps, and must keep on disk: a reply may
// be sent only once the state it reports is fsynced.
type State struct {
	// Promised is the newest epoch the follower was told of (by a Fence or
	// an Append): it refuses every older one. It never decreases.
	Promised frames.Epoch
	// LogEpoch is the epoch whose owner wrote Entries (0: nobody yet). It
	// never exceeds Promised, and changes only when that owner's Reset
	// replaces the log whole.
	LogEpoch frames.Epoch
	// Base is the bucket's durable point as LogEpoch's owner last reported
	// it; Entries are chained from it.
	Base    Point
	Entries []Entry
}

// End is the last point of the log.
func (s *State) End() Point { return endOf(s.Base, s.Entries) }

// Follower is the follower side of the protocol, without I/O: Handle takes
// a message and returns the reply. The caller persists State (fsync)
// before it sends the reply; a crash in between loses the message, which
// the protocol tolerates, as long as the follower restarts from what is on
// its disk (OpenFollower) and not from memory.
//
// Within one epoch a follower's log only grows at its end and is trimmed at
// its start: a late or duplicated message never takes back what it
// acknowledged.
type Follower struct {
	max   int64
	st    State
	bytes int64 // sizeOf(st.Entries)
}

// NewFollower returns a follower that holds nothing and was told of no
// epoch.
func NewFollower(lim Limits) *Follower { return &Follower{max: lim.tail()} }

// OpenFollower resumes a follower from its stored state, which it checks:
// a state that is not chained, holds more than the bound or has a log epoch
// past its promise is refused (ErrInvalid), never repaired.
func OpenFollower(st State, lim Limits) (*Follower, error) {
	f := &Follower{max: lim.tail(), st: st, bytes: sizeOf(st.Entries)}
	switch {
	case !chained(st.Base, st.Entries):
		return nil, fmt.Errorf("%w: follower state: entries not chained from seq %d", ErrInvalid, st.Base.Seq)
	case st.LogEpoch > st.Promised:
		return nil, fmt.Errorf("%w: follower state: log epoch %d past promised epoch %d", ErrInvalid, st.LogEpoch, st.Promised)
	case f.bytes > f.max:
		return nil, fmt.Errorf("%w: follower state: %d bytes past the bound of %d", ErrInvalid, f.bytes, f.max)
	}
	f.st.Entries = slices.Clip(f.st.Entries)
	return f, nil
}

// State returns the follower's state. Its entries are shared: read only.
func (f *Follower) State() State {
	st := f.st
	st.Entries = slices.Clip(st.Entries)
	return st
}

// Bytes is what the follower holds, counted against Limits.MaxTailBytes.
func (f *Follower) Bytes() int64 { return f.bytes }

// Handle applies a message and returns the reply to send to its sender,
// nil for a message a follower does not take (Promise, Ack, Refuse).
func (f *Follower) Handle(m Message) Message {
	switch m := m.(type) {
	case *Fence:
		return f.fence(m)
	case *Append:
		return f.append(m)
	}
	return nil
}

func (f *Follower) refuse(epoch frames.Epoch, r Reason) *Refuse {
	return &Refuse{Epoch: epoch, Reason: r, Newest: f.st.Promised, End: f.st.End()}
}

func (f *Follower) fence(m *Fence) Message {
	if m.Epoch == 0 {
		return f.refuse(m.Epoch, RefuseBroken)
	}
	if m.Epoch < f.st.Promised && !faults.noFenceCheck {
		return f.refuse(m.Epoch, RefuseStale)
	}
	f.st.Promised = max(f.st.Promised, m.Epoch)
	return &Promise{Epoch: m.Epoch, LogEpoch: f.st.LogEpoch, Base: f.st.Base, Entries: slices.Clip(f.st.Entries)}
}

func (f *Follower) append(m *Append) Message {
	if m.Epoch == 0 || (!chained(m.Prev, m.Entries) && !faults.noChainCheck) {
		return f.refuse(m.Epoch, RefuseBroken)
	}
	if m.Epoch < f.st.Promised && !faults.noFenceCheck {
		return f.refuse(m.Epoch, RefuseStale)
	}
	if m.Epoch > f.st.Promised && !m.Reset {
		// Only a Fence or a reset raises the promise (doc.go, "The
		// follower"): this one changes nothing, as if it were lost.
		return f.refuse(m.Epoch, RefuseNeedReset)
	}
	// An owner of a newer epoch exists: refuse the older ones from now on,
	// whatever becomes of this message.
	f.st.Promised = max(f.st.Promised, m.Epoch)
	if m.Epoch != f.st.LogEpoch {
		if !m.Reset {
			return f.refuse(m.Epoch, RefuseNeedReset)
		}
		return f.adopt(m)
	}
	end := f.st.End()
	last := endOf(m.Prev, m.Entries)
	var add []Entry
	switch {
	case end.Seq < m.Prev.Seq:
		if m.Reset {
			// Everything held is at or before the owner's durable point.
			return f.adopt(m)
		}
		return f.refuse(m.Epoch, RefuseGap)
	case end.Seq >= last.Seq:
		// Nothing new (a duplicate, a late retransmission, a trim): what
		// overlaps must agree.
		if c, ok := chainAt(f.st.Base, f.st.Entries, last.Seq); ok && c != last.Chain {
			return f.refuse(m.Epoch, RefuseBroken)
		}
	default:
		if c, _ := chainAt(m.Prev, m.Entries, end.Seq); c != end.Chain {
			return f.refuse(m.Epoch, RefuseBroken)
		}
		add = m.Entries[end.Seq-m.Prev.Seq:]
	}
	// Appending never rewrites what a State or Promise handed out: the log
	// never shrinks at its end, so the array past its length is unseen.
	entries := append(f.st.Entries, add...)
	base, i, ok := trimAt(f.st.Base, entries, m.Durable)
	if !ok {
		return f.refuse(m.Epoch, RefuseBroken)
	}
	bytes := f.bytes + sizeOf(add) - sizeOf(entries[:i])
	if bytes > f.max {
		return f.refuse(m.Epoch, RefuseFull)
	}
	f.st.Base, f.st.Entries, f.bytes = base, entries[i:], bytes
	return &Ack{Epoch: m.Epoch, End: f.st.End()}
}

// adopt replaces the log with the owner's (a Reset).
func (f *Follower) adopt(m *Append) Message {
	base, i, ok := trimAt(m.Prev, m.Entries, m.Durable)
	if !ok {
		return f.refuse(m.Epoch, RefuseBroken)
	}
	es := slices.Clip(m.Entries[i:])
	bytes := sizeOf(es)
	if bytes > f.max {
		return f.refuse(m.Epoch, RefuseFull)
	}
	f.st.LogEpoch, f.st.Base, f.st.Entries, f.bytes = m.Epoch, base, es, bytes
	return &Ack{Epoch: m.Epoch, End: f.st.End()}
}
