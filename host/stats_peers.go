package host

import (
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/session"
)

// PeerStats describes acknowledgement by followers on a host
// (Config.Peers): the node's part in the follower protocol, as the owner
// of its actors and as a follower of other nodes' (its store). Like Stats
// it names no actor: the figures of the open actors are summed, counted
// or their maximum taken.
type PeerStats struct {
	// Hub counts what the node's hub did since New (quorum.Hub.Stats):
	// sessions running, takeovers, tails recovered, sessions superseded,
	// late replies, refused sends, follower store failures, and the
	// fences the follower store answered with a promise.
	Hub quorum.Stats
	// AckedByFollowers and AckedByBucket count the acknowledgements
	// (Durable calls that returned nil, Sync commits) that q followers
	// gave first, and that the bucket gave first (session.Stats.AckedByPeers,
	// AckedByBucket); Entries the commits handed to followers, and
	// Backpressure how often a database waited for the bucket because its
	// followers held their bound (session.Stats.Entries, PeerBackpressure).
	// Each sums the databases open now and every one this host closed
	// since New, so that it only grows, as a session's own count starts
	// again at 0.
	AckedByFollowers, AckedByBucket, Entries, Backpressure int64
	// Of the open databases: WithFollowers counts those whose session
	// has followers (a node alone has none: the bucket acknowledges);
	// Followers sums the followers in their sets, and Failed those of
	// them the owner stopped sending to (follow.FollowerStatus.Failed:
	// full, broken). BelowQuorum counts the sessions that cannot gather a
	// quorum now (quorum.Session.Acked: fewer followers than it that are
	// neither failed nor served by no live node): they acknowledge by the
	// bucket alone. A follower that does not answer is not failed: its lag
	// grows.
	WithFollowers, Followers, Failed, BelowQuorum int
	// LagSum and LagMax are how many commits of its owner's log each
	// follower not failed lacks (SessionStats.Head - Matched), summed and
	// the most. A follower that has not answered yet in the session lacks
	// the whole log (Matched 0). A failed follower's lag only grows, and
	// is left out: Failed counts it.
	LagSum, LagMax int64
	// StoreBytes is what the node's follower store holds for every actor
	// it follows (tails.Store.Bytes, which PeersConfig.MaxStoreBytes
	// bounds).
	StoreBytes int64
}

// peerTotals are what the databases this host closed acknowledged
// (session.Stats' peer counters at their close), for PeerStats' sums to only
// grow. Guarded by Host.mu: Stats reads them with the list of the open
// actors, so that a database is counted either open or here, never both.
type peerTotals struct {
	ackedByFollowers, ackedByBucket, entries, backpressure int64
}

// retire adds a closed database's counters.
func (t *peerTotals) retire(s session.Stats) {
	t.ackedByFollowers += s.AckedByPeers
	t.ackedByBucket += s.AckedByBucket
	t.entries += s.Entries
	t.backpressure += s.PeerBackpressure
}

// add sums one open database: its counters and its session's followers
// (nil: none).
func (p *PeerStats) add(s session.Stats, peers *quorum.Session) {
	p.AckedByFollowers += s.AckedByPeers
	p.AckedByBucket += s.AckedByBucket
	p.Entries += s.Entries
	p.Backpressure += s.PeerBackpressure
	if peers == nil {
		return
	}
	ss := peers.Stats()
	members := 0
	for _, f := range ss.Followers {
		if !f.Member {
			continue // joining the set: not counted until it is in
		}
		members++
		if f.Failed != nil {
			p.Failed++
			continue
		}
		lag := int64(0)
		if ss.Head > f.Matched {
			lag = int64(ss.Head - f.Matched)
		}
		p.LagSum += lag
		p.LagMax = max(p.LagMax, lag)
	}
	if members == 0 {
		return
	}
	p.WithFollowers++
	p.Followers += members
	if _, _, quorum := peers.Acked(); !quorum {
		p.BelowQuorum++
	}
}
