package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/framectl/framectl/host"
)

// quorumDescs describe what a scrape reads from host.Stats.Peers, in peer
// mode only (host.Config.Peers): one series per node (and per source or
// state), never one per actor.
type quorumDescs struct {
	acks, entries, backpressure *prometheus.Desc

	sessions, takeovers, tailsRecovered, superseded *prometheus.Desc
	late, sendErrors, storeErrors, fences, replaced *prometheus.Desc
	unproven, claimReadErrors                       *prometheus.Desc

	withFollowers, followers, belowQuorum *prometheus.Desc
	lagSum, lagMax, storeBytes            *prometheus.Desc
}

func newQuorumDescs() *quorumDescs {
	return &quorumDescs{
		acks:         newDesc("framectl_quorum_acks_total", "Acknowledgements (Durable calls, Sync commits) in peer mode, by what gave them first (followers: q of them held the commit; bucket).", "by"),
		entries:      newDesc("framectl_quorum_entries_total", "Commits handed to the followers."),
		backpressure: newDesc("framectl_quorum_backpressure_total", "Times a database waited for the bucket because its followers held their bound past the bucket's durable point."),

		sessions:        newDesc("framectl_quorum_sessions", "Follower protocol sessions of this node's actors running now (an owner, or a takeover)."),
		takeovers:       newDesc("framectl_quorum_takeovers_total", "Takeovers started: the followers of the previous owner fenced before an actor opened."),
		tailsRecovered:  newDesc("framectl_quorum_tails_recovered_total", "Takeovers that recovered commits from the followers that the bucket lacked."),
		superseded:      newDesc("framectl_quorum_superseded_total", "Sessions a follower reported fenced by a newer epoch."),
		late:            newDesc("framectl_quorum_late_replies_total", "Follower replies for an actor with no session on this node (dropped)."),
		sendErrors:      newDesc("framectl_quorum_send_errors_total", "Messages to other nodes the transport refused (the protocol sends again)."),
		storeErrors:     newDesc("framectl_quorum_store_errors_total", "Failures of this node's follower store (a full store or disk: the owner stops sending to it)."),
		replaced:        newDesc("framectl_quorum_followers_replaced_total", "Followers replaced while their owner's session ran (failed, or no live node served them): own.json recorded the newcomer."),
		fences:          newDesc("framectl_quorum_fences_promised_total", "Fence messages this node's follower store answered with a promise (to refuse older epochs), for new owners' takeovers."),
		unproven:        newDesc("framectl_quorum_unproven_total", "Fences and resets this node's follower store refused because the actor's own.json showed no owner of their epoch (a sender that is no owner)."),
		claimReadErrors: newDesc("framectl_quorum_claim_read_errors_total", "Reads of own.json, to check a fence or reset before promising its epoch, that failed (the message was dropped; its sender sends it again)."),

		withFollowers: newDesc("framectl_quorum_actors_with_followers", "Open actors whose session has followers."),
		followers:     newDesc("framectl_quorum_followers", "Followers in the sets of the open actors, summed, by state (active: sent to, answering or not; failed: full or broken, no longer sent to).", "state"),
		belowQuorum:   newDesc("framectl_quorum_below_quorum_actors", "Open actors with fewer active followers than their quorum: the bucket alone acknowledges their commits."),
		lagSum:        newDesc("framectl_quorum_follower_lag_sum_commits", "Commits of their owner's log the active followers lack, summed over the open actors' followers."),
		lagMax:        newDesc("framectl_quorum_follower_lag_max_commits", "Commits of its owner's log the active follower that lacks most lacks, over the open actors."),
		storeBytes:    newDesc("framectl_quorum_store_bytes", "Bytes this node's follower store holds for the actors it follows."),
	}
}

func (d *quorumDescs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{
		d.acks, d.entries, d.backpressure,
		d.sessions, d.takeovers, d.tailsRecovered, d.superseded, d.late, d.sendErrors, d.storeErrors, d.fences, d.replaced,
		d.unproven, d.claimReadErrors,
		d.withFollowers, d.followers, d.belowQuorum, d.lagSum, d.lagMax, d.storeBytes,
	} {
		ch <- desc
	}
}

func (d *quorumDescs) collect(ch chan<- prometheus.Metric, p *host.PeerStats) {
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	counter(d.acks, p.AckedByFollowers, "followers")
	counter(d.acks, p.AckedByBucket, "bucket")
	counter(d.entries, p.Entries)
	counter(d.backpressure, p.Backpressure)

	h := p.Hub
	gauge(d.sessions, float64(h.Sessions))
	counter(d.takeovers, h.Takeovers)
	counter(d.tailsRecovered, h.TailsRecovered)
	counter(d.superseded, h.Superseded)
	counter(d.late, h.Late)
	counter(d.sendErrors, h.SendErrors)
	counter(d.storeErrors, h.StoreErrors)
	counter(d.fences, h.Fences)
	counter(d.replaced, h.Replaced)
	counter(d.unproven, h.Unproven)
	counter(d.claimReadErrors, h.ClaimReadErrors)

	gauge(d.withFollowers, float64(p.WithFollowers))
	gauge(d.followers, float64(p.Followers-p.Failed), "active")
	gauge(d.followers, float64(p.Failed), "failed")
	gauge(d.belowQuorum, float64(p.BelowQuorum))
	gauge(d.lagSum, float64(p.LagSum))
	gauge(d.lagMax, float64(p.LagMax))
	gauge(d.storeBytes, float64(p.StoreBytes))
}
