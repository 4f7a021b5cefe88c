package quorum

import "sync/atomic"

// Stats counts what a hub did since New.
type Stats struct {
	Sessions       int   // sessions running now (owner or takeover)
	Takeovers      int64 // takeovers started
	TailsRecovered int64 // takeovers that recovered commits the bucket lacked
	Superseded     int64 // sessions a newer epoch fenced at a follower
	Late           int64 // replies for an actor with no session here (dropped)
	SendErrors     int64 // sends the transport refused (follow resends)
	StoreErrors    int64 // follower store failures (a full disk: the owner replaces this follower)
	Replaced       int64 // followers replaced while their session ran (own.json recorded the newcomer)
	Fences         int64 // Fence messages this node's follower store answered with a Promise (fences.go)
	// Unproven: Fences and resets this node's follower store refused
	// because the bucket showed no owner of their epoch (admit.go), and
	// ClaimReadErrors the reads of own.json for that check that failed
	// (the message is dropped; its sender sends it again).
	Unproven, ClaimReadErrors int64
}

type hubCounters struct {
	takeovers, tailsRecovered, superseded, late, sendErrors, storeErrors, replaced, fences atomic.Int64
	unproven, claimReadErrors                                                              atomic.Int64
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.sessions)
	h.mu.Unlock()
	c := &h.stats
	return Stats{Sessions: n, Takeovers: c.takeovers.Load(), TailsRecovered: c.tailsRecovered.Load(),
		Superseded: c.superseded.Load(), Late: c.late.Load(), SendErrors: c.sendErrors.Load(), StoreErrors: c.storeErrors.Load(),
		Replaced: c.replaced.Load(), Fences: c.fences.Load(), Unproven: c.unproven.Load(), ClaimReadErrors: c.claimReadErrors.Load()}
}
