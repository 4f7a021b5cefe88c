package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/session"
)

// sessionMetrics are fed by a session.Observer, one event at a time: histograms
// and counts that outlive a database's session (session.Stats starts again
// with each).
type sessionMetrics struct {
	durableWait   prometheus.Histogram
	durableErrors prometheus.Counter

	compactions        *prometheus.CounterVec
	compactionDuration prometheus.Histogram
	restores           *prometheus.CounterVec
	restoreDuration    prometheus.Histogram
	proofs             *prometheus.CounterVec
	proofDuration      prometheus.Histogram

	compactionOK, compactionError, compactionCanceled prometheus.Counter
	restoreOK, restoreError                           prometheus.Counter
	proofOK, proofFenced, proofError                  prometheus.Counter
}

// durableSeconds are the buckets of Durable's wait: one upload, of a few
// milliseconds to a directory bucket and tens of milliseconds to seconds
// to an S3 server, longer while uploads fail and are retried.
var durableSeconds = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// passSeconds are the buckets of compaction passes and restores: a listing
// for a small actor, minutes for a large one over a slow link.
var passSeconds = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newSessionMetrics() *sessionMetrics {
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	byResult := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"result"})
	}
	m := &sessionMetrics{
		durableWait: histogram("framectl_vfs_durable_wait_seconds",
			"How long each framectl.DB.Durable call waited (the output gate), whatever it returned.", durableSeconds),
		durableErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "framectl_vfs_durable_errors_total",
			Help: "framectl.DB.Durable calls that returned an error (fenced, stopped, closed, the caller's context).",
		}),
		compactions: byResult("framectl_vfs_compactions_total",
			"Background compaction passes by result (ok, error, canceled: cut short because replication stopped)."),
		compactionDuration: histogram("framectl_vfs_compaction_duration_seconds",
			"Duration of background compaction passes, whatever their result.", passSeconds),
		restores: byResult("framectl_vfs_restores_total",
			"Restores from the bucket that opening a database ran, by result (ok, error)."),
		restoreDuration: histogram("framectl_vfs_restore_duration_seconds",
			"Duration of the restores that opening a database ran, whatever their result.", passSeconds),
		proofs: byResult("framectl_vfs_proofs_total",
			"Reads of own.json that an acknowledgement by the bucket waited for (the proof of ownership), by result (ok; fenced: another claim; error: the read failed, retried)."),
		proofDuration: histogram("framectl_vfs_proof_duration_seconds",
			"Duration of those reads of own.json, whatever their result.", durableSeconds),
	}
	m.compactionOK = m.compactions.WithLabelValues("ok")
	m.compactionError = m.compactions.WithLabelValues("error")
	m.compactionCanceled = m.compactions.WithLabelValues("canceled")
	m.restoreOK = m.restores.WithLabelValues("ok")
	m.restoreError = m.restores.WithLabelValues("error")
	m.proofOK = m.proofs.WithLabelValues("ok")
	m.proofFenced = m.proofs.WithLabelValues("fenced")
	m.proofError = m.proofs.WithLabelValues("error")
	return m
}

func (m *sessionMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.durableWait, m.durableErrors, m.compactions, m.compactionDuration, m.restores, m.restoreDuration,
		m.proofs, m.proofDuration}
}

// observer returns a session.Observer that feeds m, then calls next's funcs.
func (m *sessionMetrics) observer(next session.Observer) session.Observer {
	return session.Observer{
		Durable: func(wait time.Duration, err error) {
			m.durableWait.Observe(wait.Seconds())
			if err != nil {
				m.durableErrors.Inc()
			}
			if next.Durable != nil {
				next.Durable(wait, err)
			}
		},
		Compaction: func(took time.Duration, err error) {
			m.compactionDuration.Observe(took.Seconds())
			switch {
			case err == nil:
				m.compactionOK.Inc()
			case errors.Is(err, context.Canceled):
				m.compactionCanceled.Inc()
			default:
				m.compactionError.Inc()
			}
			if next.Compaction != nil {
				next.Compaction(took, err)
			}
		},
		Restore: func(took time.Duration, err error) {
			m.restoreDuration.Observe(took.Seconds())
			if err == nil {
				m.restoreOK.Inc()
			} else {
				m.restoreError.Inc()
			}
			if next.Restore != nil {
				next.Restore(took, err)
			}
		},
		Proof: func(took time.Duration, err error) {
			m.proofDuration.Observe(took.Seconds())
			switch {
			case err == nil:
				m.proofOK.Inc()
			case errors.Is(err, session.ErrFenced) || errors.Is(err, fence.ErrFenced):
				m.proofFenced.Inc()
			default:
				m.proofError.Inc()
			}
			if next.Proof != nil {
				next.Proof(took, err)
			}
		},
	}
}
