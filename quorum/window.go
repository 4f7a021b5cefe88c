package quorum

import (
	"slices"
	"time"

	"github.com/framectl/framectl/follow"
)

// One Append in flight per follower.
//
// follow.Owner sends an Append for every commit, at once. A follower
// handles one message at a time and fsyncs before it answers, so with many
// writers the messages queue behind each other's fsyncs (measured:
// BenchmarkDurable at 16 writers ran at a third of the bucket's rate, one
// fsync per commit per follower). So a session keeps at most one Append
// in flight to each follower: while one waits for its answer, the next
// ones are merged into one (their entries follow each other: the merged
// message is what the owner would have sent had it sent once), which goes
// when the answer comes. The follower then fsyncs once per round trip,
// whatever the commit rate: group commit. Resets and every other message
// go at once, and a reset drops what was held (it carries all of it). An
// answer that never comes frees the window after the owner's retransmit
// interval, as follow resends then anyway.
type window struct {
	inflight bool
	since    time.Time
	held     *follow.Append
}

// route decides, for each envelope the owner produced, whether it goes
// now; called with the session's mutex held. It returns what to send.
func (s *Session) route(out []follow.Envelope, now time.Time) []follow.Envelope {
	send := out[:0]
	for _, e := range out {
		m, ok := e.Msg.(*follow.Append)
		w := s.windows[e.To]
		if w == nil {
			w = &window{}
			s.windows[e.To] = w
		}
		switch {
		case !ok:
			send = append(send, e)
		case m.Reset:
			w.held = nil
			w.inflight, w.since = true, now
			send = append(send, e)
		case !w.inflight:
			w.inflight, w.since = true, now
			send = append(send, e)
		case w.held == nil:
			w.held = cloneAppend(m)
		case follows(w.held, m):
			w.held.Entries = append(w.held.Entries, m.Entries...)
			w.held.Durable = m.Durable
		default:
			// Not the next one (a retransmission from an earlier point):
			// it replaces what was held, which it covers or restarts.
			w.held = cloneAppend(m)
		}
	}
	return send
}

// answered frees from's window and returns what it held, to send.
func (s *Session) answered(from follow.FollowerID, now time.Time) []follow.Envelope {
	w := s.windows[from]
	if w == nil {
		return nil
	}
	w.inflight = false
	return s.release(from, w, now)
}

// expire frees the windows whose answer is overdue (a lost message or
// answer) and returns what they held.
func (s *Session) expire(now time.Time, after time.Duration) []follow.Envelope {
	var out []follow.Envelope
	for id, w := range s.windows {
		if w.inflight && now.Sub(w.since) >= after {
			w.inflight = false
			out = append(out, s.release(id, w, now)...)
		}
	}
	return out
}

func (s *Session) release(id follow.FollowerID, w *window, now time.Time) []follow.Envelope {
	if w.held == nil {
		return nil
	}
	m := w.held
	w.held, w.inflight, w.since = nil, true, now
	return []follow.Envelope{{To: id, Msg: m}}
}

// follows reports whether m extends held: same epoch, starting where held
// ends.
func follows(held, m *follow.Append) bool {
	end := held.Prev
	if n := len(held.Entries); n > 0 {
		end = held.Entries[n-1].Point()
	}
	return m.Epoch == held.Epoch && m.Prev == end
}

func cloneAppend(m *follow.Append) *follow.Append {
	c := *m
	c.Entries = slices.Clone(m.Entries)
	return &c
}
