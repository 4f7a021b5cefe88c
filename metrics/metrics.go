package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/session"
)

// Metrics is one node's collectors: a prometheus.Collector to register
// with a registry. Safe for concurrent use.
type Metrics struct {
	bucket  *bucketMetrics
	session *sessionMetrics
	descs   *hostDescs
	quorum  *quorumDescs
	host    atomic.Pointer[host.Host]
}

var _ prometheus.Collector = (*Metrics)(nil)

// New returns collectors that observe nothing yet: wrap the node's bucket
// (Bucket), observe its databases (Observer), or both (Instrument), and
// Watch its host.
func New() *Metrics {
	return &Metrics{bucket: newBucketMetrics(), session: newSessionMetrics(), descs: newHostDescs(), quorum: newQuorumDescs()}
}

// Bucket returns b with every request counted and timed. It answers
// exactly what b answers, and a session paces its uploads as it paces b's.
func (m *Metrics) Bucket(b bucket.Bucket) bucket.Bucket {
	if b == nil {
		return nil
	}
	return &observedBucket{b: b, m: m.bucket}
}

// Observer returns a session.Observer that feeds the durable wait, compaction
// and restore metrics, and then calls next's funcs (the zero Observer:
// none).
func (m *Metrics) Observer(next session.Observer) session.Observer { return m.session.observer(next) }

// Instrument returns cfg with its bucket observed (Bucket) and every
// actor's database observed too (Observer, before what cfg.VFS.Observer
// did already). Give the result to host.New, then Watch the host.
func (m *Metrics) Instrument(cfg host.Config) host.Config {
	cfg.Bucket = m.Bucket(cfg.Bucket)
	cfg.VFS.Observer = m.Observer(cfg.VFS.Observer)
	return cfg
}

// Watch makes every scrape from now on read h.Stats: its actors, their
// summed replication, claims, fences and alarms, and acknowledgement by
// followers (host.Stats.Peers). Before Watch, and with a
// nil h, those are not exposed.
func (m *Metrics) Watch(h *host.Host) { m.host.Store(h) }

// Describe sends the descriptions of every metric m exposes.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.bucket.requests.Describe(ch)
	m.bucket.duration.Describe(ch)
	for _, c := range m.session.collectors() {
		c.Describe(ch)
	}
	m.descs.describe(ch)
	m.quorum.describe(ch)
}

// Collect sends the metrics' current values: what the bucket and the
// observer counted, and the watched host's Stats, read now (its peer-mode
// section only from a host in peer mode).
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.bucket.requests.Collect(ch)
	m.bucket.duration.Collect(ch)
	for _, c := range m.session.collectors() {
		c.Collect(ch)
	}
	if h := m.host.Load(); h != nil {
		s := h.Stats()
		m.descs.collect(ch, s)
		if s.Peers != nil {
			m.quorum.collect(ch, s.Peers)
		}
	}
}

// newDesc is the description of a metric the collectors compute when
// scraped (hostDescs, quorumDescs): no constant labels.
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}
