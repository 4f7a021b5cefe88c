package host

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/session"
)

// Stats describes a host: what it holds now, and what it did since New. It
// is what package metrics reads at every scrape, so it names no actor: a
// node may hold many thousands, and their replication is summed.
type Stats struct {
	// Queued, Opening, Open and Closing count the host's actors by State
	// now; Open counts those it holds.
	Queued, Opening, Open, Closing int
	// Replication sums the session.Stats of the actors whose database is open
	// (Open and Closing).
	Replication Replication
	// Claims counts the attempts to open an actor (session.Open claims it
	// first), by outcome.
	Claims Claims
	// NodesFenced and LeasesLost count the losses of this host's node:
	// fenced by a peer (fence.ErrFenced), or its lease not renewed in
	// time (fence.ErrLeaseLost).
	NodesFenced, LeasesLost int64
	// PeersFenced counts the expired peers this host's nodes fenced to
	// claim the actors they held (fence.Observer.Fences).
	PeersFenced int64
	// ActorsFenced counts the open actors taken out of service because
	// their session can no longer acknowledge (its node was fenced or lost
	// its lease: session.ErrFenced), ActorsStopped those whose replication
	// stopped (session.ErrStopped).
	ActorsFenced, ActorsStopped int64
	// Alarms describes the alarms of this host's actors.
	Alarms alarm.Stats
	// Draining reports that the host stopped claiming (StopClaiming or
	// Drain); Drain sums the outcomes of Drain's hooks over its namespaces
	// (DrainReport), zero until a drain's hooks ended.
	Draining bool
	Drain    DrainStats
	// Peers describes acknowledgement by followers (stats_peers.go); nil
	// without Config.Peers.
	Peers *PeerStats
}

// DrainStats counts the actors of a drain by what their hook did
// (NamespaceDrain's outcomes, summed over namespaces).
type DrainStats struct {
	Drained, Skipped, Failed, TimedOut int64
}

// Replication sums the replication of many databases.
type Replication struct {
	// Actors counts the databases summed.
	Actors int
	// Lagging counts those with a commit not yet in the bucket (Lag > 0);
	// MaxLag is the largest Lag, TotalLag their sum.
	Lagging          int
	MaxLag, TotalLag time.Duration
	// Pending sums the bytes captured and not yet in the bucket;
	// MaxPending is the most one database has.
	Pending, MaxPending int64
	// UploadsFailing counts the databases whose uploads fail now
	// (session.Stats.UploadError), Stopped those whose replication stopped
	// (fenced, or a write it cannot account for).
	UploadsFailing, Stopped int
}

func (r *Replication) add(s session.Stats) {
	r.Actors++
	if s.Lag > 0 {
		r.Lagging++
		r.TotalLag += s.Lag
		r.MaxLag = max(r.MaxLag, s.Lag)
	}
	r.Pending += s.Pending
	r.MaxPending = max(r.MaxPending, s.Pending)
	if s.UploadError != nil {
		r.UploadsFailing++
	}
	if s.Stopped != nil {
		r.Stopped++
	}
}

// Claims counts the attempts to open an actor, by outcome. OK: claimed and
// opened. Held: a live node elsewhere holds the actor (the request is
// forwarded there, or the claim retried). Waiting: the holder's lease has
// not run out yet (fence.ErrHolderUnseen), or another process holds the
// actor's directory (ErrLocked); the claim is retried. Failed: any other
// failure (the bucket, a restore, Hooks.Opened). An open given up before
// it claimed (nobody waits any more, the host stopped) is not counted.
type Claims struct {
	OK, Held, Waiting, Failed int64
}

// counters are the host's counts since New, updated where the events
// happen; Stats reads them.
type counters struct {
	claimsOK, claimsHeld, claimsWaiting, claimsFailed atomic.Int64
	nodesFenced, leasesLost                           atomic.Int64
	actorsFenced, actorsStopped                       atomic.Int64

	drained, drainSkipped, drainFailed, drainTimedOut atomic.Int64

	// retired are the observers of this host's earlier nodes, whose
	// fences still count. Guarded by Host.mu.
	retired []*fence.Observer
	// closed sums the peer counters of the databases closed. Guarded by
	// Host.mu.
	closed peerTotals
}

// claimed counts one attempt to open an actor.
func (c *counters) claimed(err error) {
	var held *fence.HeldError
	switch {
	case err == nil:
		c.claimsOK.Add(1)
	case errors.Is(err, errDeserted), errors.Is(err, ErrStopped):
	case errors.As(err, &held):
		c.claimsHeld.Add(1)
	case errors.Is(err, fence.ErrHolderUnseen), errors.Is(err, ErrLocked):
		c.claimsWaiting.Add(1)
	default:
		c.claimsFailed.Add(1)
	}
}

// drainedHooks counts what a drain's hooks did.
func (c *counters) drainedHooks(ns []NamespaceDrain) {
	for _, n := range ns {
		c.drained.Add(int64(n.Drained))
		c.drainSkipped.Add(int64(n.Skipped))
		c.drainFailed.Add(int64(n.Failed))
		c.drainTimedOut.Add(int64(n.TimedOut))
	}
}

// nodeLost counts a loss of the host's node.
func (c *counters) nodeLost(err error) {
	if errors.Is(err, fence.ErrFenced) {
		c.nodesFenced.Add(1)
	} else {
		c.leasesLost.Add(1)
	}
}

// dropped counts an open actor taken out of service.
func (c *counters) dropped(why error) {
	if errors.Is(why, session.ErrStopped) {
		c.actorsStopped.Add(1)
	} else {
		c.actorsFenced.Add(1)
	}
}

// Stats describes the host now. It holds the host's lock only to list the
// actors, and reads their databases' Stats after it (each takes its
// database's lock for a moment, never the bucket's time), and in peer
// mode their sessions' (quorum.Session.Stats: its lock, a moment): a
// scrape of a node holding many actors does not hold up Acquire.
func (h *Host) Stats() Stats {
	var s Stats
	h.mu.Lock()
	open := make([]*Actor, 0, len(h.actors))
	for _, a := range h.actors {
		switch a.state {
		case Queued:
			s.Queued++
		case Opening:
			s.Opening++
		case Open:
			s.Open++
			open = append(open, a)
		case Closing:
			s.Closing++
			open = append(open, a)
		}
	}
	s.Draining = h.draining
	observers := append([]*fence.Observer{h.node.Observer}, h.stats.retired...)
	closed := h.stats.closed
	h.mu.Unlock()

	if h.peers != nil {
		s.Peers = &PeerStats{Hub: h.peers.hub.Stats(), StoreBytes: h.peers.store.Bytes(),
			AckedByFollowers: closed.ackedByFollowers, AckedByBucket: closed.ackedByBucket,
			Entries: closed.entries, Backpressure: closed.backpressure}
	}
	// db and peers are read-only once the actor is open.
	for _, a := range open {
		st := a.db.Stats()
		s.Replication.add(st)
		if s.Peers != nil {
			s.Peers.add(st, a.peers)
		}
	}
	for _, o := range observers {
		s.PeersFenced += o.Fences()
	}
	c := &h.stats
	s.Claims = Claims{OK: c.claimsOK.Load(), Held: c.claimsHeld.Load(), Waiting: c.claimsWaiting.Load(), Failed: c.claimsFailed.Load()}
	s.NodesFenced, s.LeasesLost = c.nodesFenced.Load(), c.leasesLost.Load()
	s.ActorsFenced, s.ActorsStopped = c.actorsFenced.Load(), c.actorsStopped.Load()
	s.Alarms = h.alarms.Stats()
	s.Drain = DrainStats{Drained: c.drained.Load(), Skipped: c.drainSkipped.Load(), Failed: c.drainFailed.Load(), TimedOut: c.drainTimedOut.Load()}
	return s
}
