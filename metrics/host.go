package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/framectl/framectl/host"
)

// hostDescs describe what a scrape reads from host.Stats: one series per
// node (and per state, outcome or reason), never one per actor.
type hostDescs struct {
	actors *prometheus.Desc

	lagging, lagMax, lagSum        *prometheus.Desc
	pending, pendingMax            *prometheus.Desc
	uploadsFailing, stoppedActors  *prometheus.Desc
	claims, nodeLosses, peerFences *prometheus.Desc
	dropped                        *prometheus.Desc

	alarmsPending, alarmRuns, alarmsDropped, alarmsLate, alarmLateness *prometheus.Desc

	draining, drainActors *prometheus.Desc
}

func newHostDescs() *hostDescs {
	return &hostDescs{
		actors: newDesc("framectl_host_actors", "Actors the host has, by state (queued, opening, open: held, closing).", "state"),

		lagging:        newDesc("framectl_vfs_lagging_actors", "Open databases with a commit not yet in the bucket."),
		lagMax:         newDesc("framectl_vfs_lag_max_seconds", "Age of the oldest commit not yet in the bucket, over every open database (0: none)."),
		lagSum:         newDesc("framectl_vfs_lag_sum_seconds", "Sum over the open databases of the age of each one's oldest commit not yet in the bucket."),
		pending:        newDesc("framectl_vfs_pending_bytes", "Page bytes captured and not yet in the bucket, summed over the open databases."),
		pendingMax:     newDesc("framectl_vfs_pending_max_bytes", "Page bytes captured and not yet in the bucket of the open database that has most."),
		uploadsFailing: newDesc("framectl_vfs_upload_failing_actors", "Open databases whose uploads fail now (retried until they succeed)."),
		stoppedActors:  newDesc("framectl_vfs_stopped_actors", "Open databases whose replication stopped (fenced, or a write it cannot account for)."),

		claims:     newDesc("framectl_host_claims_total", "Attempts to open an actor, each claiming it first, by result (ok, held: by a live node elsewhere, waiting: for a dead holder's lease or a locked directory, failed).", "result"),
		nodeLosses: newDesc("framectl_host_node_losses_total", "Losses of this host's node, by reason (fenced: by a peer, lease_lost: not renewed in time).", "reason"),
		peerFences: newDesc("framectl_host_peers_fenced_total", "Expired peers this host's nodes fenced, to claim the actors they held."),
		dropped:    newDesc("framectl_host_actors_dropped_total", "Open actors taken out of service, by reason (fenced: their session can no longer acknowledge; stopped: replication stopped).", "reason"),

		alarmsPending: newDesc("framectl_host_alarms_pending", "Actors whose alarm this host will look at: held ones with an alarm set, failed ones awaiting their retry, hibernated ones it will wake."),
		alarmRuns:     newDesc("framectl_host_alarm_runs_total", "Runs of alarm handlers, by result (ok; failed: the handler's error or the clear after it).", "result"),
		alarmsDropped: newDesc("framectl_host_alarms_dropped_total", "Alarms given up after their last retry failed."),
		alarmsLate:    newDesc("framectl_host_alarms_late_total", "First runs of alarms that started more than a second after their time (taken over from a dead holder, or waiting for an open)."),
		alarmLateness: newDesc("framectl_host_alarm_lateness_seconds", "How long after its time each first run of an alarm started (sum and count)."),

		draining:    newDesc("framectl_host_draining", "1 once the host stopped claiming actors to drain, else 0."),
		drainActors: newDesc("framectl_host_drain_actors_total", "Actors of a drain by what their drain hook did (drained: returned and durable; skipped: no hook or deadline 0; failed; timed_out: cut off at the deadline).", "outcome"),
	}
}

func (d *hostDescs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{
		d.actors, d.lagging, d.lagMax, d.lagSum, d.pending, d.pendingMax, d.uploadsFailing, d.stoppedActors,
		d.claims, d.nodeLosses, d.peerFences, d.dropped,
		d.alarmsPending, d.alarmRuns, d.alarmsDropped, d.alarmsLate, d.alarmLateness,
		d.draining, d.drainActors,
	} {
		ch <- desc
	}
}

func (d *hostDescs) collect(ch chan<- prometheus.Metric, s host.Stats) {
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(d.actors, float64(s.Queued), "queued")
	gauge(d.actors, float64(s.Opening), "opening")
	gauge(d.actors, float64(s.Open), "open")
	gauge(d.actors, float64(s.Closing), "closing")

	r := s.Replication
	gauge(d.lagging, float64(r.Lagging))
	gauge(d.lagMax, r.MaxLag.Seconds())
	gauge(d.lagSum, r.TotalLag.Seconds())
	gauge(d.pending, float64(r.Pending))
	gauge(d.pendingMax, float64(r.MaxPending))
	gauge(d.uploadsFailing, float64(r.UploadsFailing))
	gauge(d.stoppedActors, float64(r.Stopped))

	counter(d.claims, s.Claims.OK, "ok")
	counter(d.claims, s.Claims.Held, "held")
	counter(d.claims, s.Claims.Waiting, "waiting")
	counter(d.claims, s.Claims.Failed, "failed")
	counter(d.nodeLosses, s.NodesFenced, "fenced")
	counter(d.nodeLosses, s.LeasesLost, "lease_lost")
	counter(d.peerFences, s.PeersFenced)
	counter(d.dropped, s.ActorsFenced, "fenced")
	counter(d.dropped, s.ActorsStopped, "stopped")

	a := s.Alarms
	gauge(d.alarmsPending, float64(a.Pending))
	counter(d.alarmRuns, a.Runs-a.Failures, "ok")
	counter(d.alarmRuns, a.Failures, "failed")
	counter(d.alarmsDropped, a.Dropped)
	counter(d.alarmsLate, a.Late)
	ch <- prometheus.MustNewConstSummary(d.alarmLateness, uint64(a.FirstRuns), a.Lateness.Seconds(), nil)

	draining := 0.0
	if s.Draining {
		draining = 1
	}
	gauge(d.draining, draining)
	counter(d.drainActors, s.Drain.Drained, "drained")
	counter(d.drainActors, s.Drain.Skipped, "skipped")
	counter(d.drainActors, s.Drain.Failed, "failed")
	counter(d.drainActors, s.Drain.TimedOut, "timed_out")
}
