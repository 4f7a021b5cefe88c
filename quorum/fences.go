package quorum

import "github.com/framectl/framectl/follow"

// promised counts a Fence that this node's follower store answered with a
// Promise (Stats.Fences): a promise to refuse every older epoch of the
// actor, which a new owner's takeover collects before it recovers the
// tail. A Fence the store refused (it promised a newer epoch already) or
// could not answer is not counted; a retransmitted Fence answered again
// counts again.
func (h *Hub) promised(m, reply follow.Message) {
	if _, ok := m.(*follow.Fence); !ok {
		return
	}
	if _, ok := reply.(*follow.Promise); ok {
		h.stats.fences.Add(1)
	}
}
