package metrics

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3" for database/sql
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/metrics/metricstest"
)

// gather is what m exposes, by metric name.
func gather(t *testing.T, m *Metrics) metricstest.Scrape { return metricstest.Gather(t, m) }

// The wrapper counts each request by operation and result and times it,
// and answers what the bucket beneath answers. Every series exists from
// the start, at zero, so that a rate over it is defined.
func TestBucketCountsAndTimes(t *testing.T) {
	ctx := t.Context()
	inner := buckettest.Dir(t)
	m := New()
	b := m.Bucket(inner)
	require.Same(t, inner, b.(interface{ Unwrap() bucket.Bucket }).Unwrap())
	assert.Equal(t, inner.String(), b.String())
	s := gather(t, m)
	for _, op := range opNames {
		for _, res := range resultNames {
			assert.Zero(t, s.Value(t, "framectl_bucket_requests_total", "op", op, "result", res), "%s %s", op, res)
		}
		assert.Zero(t, s.Value(t, "framectl_bucket_request_duration_seconds", "op", op))
	}

	body := []byte("hello")
	put, err := b.Put(ctx, "k/a", bytes.NewReader(body), int64(len(body)), bucket.Condition{})
	require.NoError(t, err)
	_, err = b.Put(ctx, "k/a", bytes.NewReader(body), int64(len(body)), bucket.Condition{IfAbsent: true})
	require.ErrorIs(t, err, bucket.ErrPrecondition)
	rc, info, err := b.Get(ctx, "k/a")
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, body, got)
	assert.Equal(t, put.ETag, info.ETag)
	_, _, err = b.Get(ctx, "k/missing")
	require.ErrorIs(t, err, bucket.ErrNotFound)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = b.Get(canceled, "k/a")
	require.ErrorIs(t, err, context.Canceled)
	st, err := b.Stat(ctx, "k/a")
	require.NoError(t, err)
	direct, err := inner.Stat(ctx, "k/a")
	require.NoError(t, err)
	assert.Equal(t, direct, st)
	page, err := b.List(ctx, "k/", "", 0)
	require.NoError(t, err)
	require.Len(t, page.Objects, 1)
	require.NoError(t, b.Delete(ctx, "k/a"))
	require.NoError(t, b.DeleteMany(ctx, []string{"k/x", "k/y"}))
	_, err = b.Put(ctx, "", bytes.NewReader(body), int64(len(body)), bucket.Condition{})
	require.ErrorIs(t, err, bucket.ErrInvalidKey)

	want := map[[2]string]float64{
		{"put", "ok"}: 1, {"put", "precondition"}: 1, {"put", "error"}: 1,
		{"get", "ok"}: 1, {"get", "not_found"}: 1, {"get", "canceled"}: 1,
		{"stat", "ok"}: 1, {"list", "ok"}: 1, {"delete", "ok"}: 1, {"delete_many", "ok"}: 1,
	}
	s = gather(t, m)
	perOp := map[string]float64{}
	for _, op := range opNames {
		for _, res := range resultNames {
			w := want[[2]string{op, res}]
			perOp[op] += w
			assert.Equal(t, w, s.Value(t, "framectl_bucket_requests_total", "op", op, "result", res), "%s %s", op, res)
		}
		assert.Equal(t, perOp[op], s.Value(t, "framectl_bucket_request_duration_seconds", "op", op), "timed %s", op)
	}
}

// Every field of host.Stats reaches its series.
func TestHostStatsExposed(t *testing.T) {
	st := host.Stats{
		Queued: 1, Opening: 2, Open: 3, Closing: 4,
		Replication: host.Replication{Actors: 7, Lagging: 5, MaxLag: 3 * time.Second, TotalLag: 4 * time.Second,
			Pending: 6000, MaxPending: 5000, UploadsFailing: 2, Stopped: 1},
		Claims:      host.Claims{OK: 10, Held: 11, Waiting: 12, Failed: 13},
		NodesFenced: 14, LeasesLost: 15, PeersFenced: 16, ActorsFenced: 17, ActorsStopped: 18,
		Alarms:   alarm.Stats{Pending: 19, Runs: 30, Failures: 8, Dropped: 2, FirstRuns: 21, Late: 3, Lateness: 90 * time.Second},
		Draining: true, Drain: host.DrainStats{Drained: 23, Skipped: 24, Failed: 25, TimedOut: 26},
	}
	got, summaries := collected(t, func(ch chan<- prometheus.Metric) { newHostDescs().collect(ch, st) })
	lateness := summaries["framectl_host_alarm_lateness_seconds"]
	assert.Equal(t, map[string]float64{
		"framectl_host_actors{state=queued}":                  1,
		"framectl_host_actors{state=opening}":                 2,
		"framectl_host_actors{state=open}":                    3,
		"framectl_host_actors{state=closing}":                 4,
		"framectl_vfs_lagging_actors":                         5,
		"framectl_vfs_lag_max_seconds":                        3,
		"framectl_vfs_lag_sum_seconds":                        4,
		"framectl_vfs_pending_bytes":                          6000,
		"framectl_vfs_pending_max_bytes":                      5000,
		"framectl_vfs_upload_failing_actors":                  2,
		"framectl_vfs_stopped_actors":                         1,
		"framectl_host_claims_total{result=ok}":               10,
		"framectl_host_claims_total{result=held}":             11,
		"framectl_host_claims_total{result=waiting}":          12,
		"framectl_host_claims_total{result=failed}":           13,
		"framectl_host_node_losses_total{reason=fenced}":      14,
		"framectl_host_node_losses_total{reason=lease_lost}":  15,
		"framectl_host_peers_fenced_total":                    16,
		"framectl_host_actors_dropped_total{reason=fenced}":   17,
		"framectl_host_actors_dropped_total{reason=stopped}":  18,
		"framectl_host_alarms_pending":                        19,
		"framectl_host_alarm_runs_total{result=ok}":           22,
		"framectl_host_alarm_runs_total{result=failed}":       8,
		"framectl_host_alarms_dropped_total":                  2,
		"framectl_host_alarms_late_total":                     3,
		"framectl_host_draining":                              1,
		"framectl_host_drain_actors_total{outcome=drained}":   23,
		"framectl_host_drain_actors_total{outcome=skipped}":   24,
		"framectl_host_drain_actors_total{outcome=failed}":    25,
		"framectl_host_drain_actors_total{outcome=timed_out}": 26,
	}, got)
	require.NotNil(t, lateness, "lateness summary")
	assert.Equal(t, uint64(21), lateness.GetSampleCount())
	assert.Equal(t, 90.0, lateness.GetSampleSum())
}

// fqName reads a Desc's name (it has no accessor; its String names it).
// collected runs collect and returns the counters' and gauges' values and
// the summaries, by name and labels ("name{label=value}").
func collected(t *testing.T, collect func(ch chan<- prometheus.Metric)) (map[string]float64, map[string]*dto.Summary) {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	collect(ch)
	close(ch)
	got, summaries := map[string]float64{}, map[string]*dto.Summary{}
	for m := range ch {
		var pb dto.Metric
		require.NoError(t, m.Write(&pb))
		name := fqName(m.Desc())
		for _, l := range pb.GetLabel() {
			name += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
		}
		switch {
		case pb.Counter != nil:
			got[name] = pb.Counter.GetValue()
		case pb.Gauge != nil:
			got[name] = pb.Gauge.GetValue()
		case pb.Summary != nil:
			summaries[name] = pb.Summary
		default:
			t.Fatalf("%s: neither a counter, a gauge nor a summary", name)
		}
	}
	return got, summaries
}

func fqName(d *prometheus.Desc) string {
	s := d.String()
	const prefix = `Desc{fqName: "`
	s = s[len(prefix):]
	return s[:bytes.IndexByte([]byte(s), '"')]
}

// The names, types and help follow Prometheus's conventions (promlint),
// those of peer mode too.
func TestLint(t *testing.T) {
	m := New()
	h := startHost(t, buckettest.Dir(t), m)
	m.Watch(h)
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	assert.Empty(t, problems)

	m = New()
	h = startPeerHost(t, buckettest.Dir(t), m, "127.0.0.1:1", &host.PeersConfig{Listen: "127.0.0.1:0", Key: clusterKey(t)})
	m.Watch(h)
	s := gather(t, m)
	require.Contains(t, s, "framectl_quorum_acks_total", "peer mode's metrics collected")
	problems, err = testutil.CollectAndLint(m)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// startHost starts a host on b, observed by m, whose actors hold a table
// t (made by Hooks.Opened, with a pool kept as the actor's value).
func startHost(t *testing.T, b bucket.Bucket, m *Metrics) *host.Host {
	t.Helper()
	return startPeerHost(t, b, m, "127.0.0.1:1", nil)
}

// startPeerHost is startHost at address addr, in peer mode with peers
// (nil: not).
func startPeerHost(t *testing.T, b bucket.Bucket, m *Metrics, addr string, peers *host.PeersConfig) *host.Host {
	t.Helper()
	cfg := m.Instrument(host.Config{
		Bucket: b, Address: addr, Dir: t.TempDir(), Idle: -1, SweepAge: -1, Peers: peers,
		Hooks: host.Hooks{
			Opened: func(ctx context.Context, a *host.Actor) error {
				pool, err := sql.Open("sqlite3", a.DB().DSN())
				if err != nil {
					return err
				}
				if _, err := pool.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS t(v BLOB)"); err != nil {
					pool.Close()
					return err
				}
				a.SetValue(pool)
				return nil
			},
			Closing: func(_ context.Context, a *host.Actor) { a.Value().(*sql.DB).Close() },
		},
	})
	h, err := host.New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h.Close(ctx)
	})
	return h
}

func write(t *testing.T, a *host.Handle) {
	t.Helper()
	_, err := a.Value().(*sql.DB).ExecContext(t.Context(), "INSERT INTO t VALUES (randomblob(10000))")
	require.NoError(t, err)
}

// isLogKey matches the keys of batches.
func isLogKey(key string) bool {
	k, err := frames.ParseKey(key)
	return err == nil && k.Kind == frames.KeyLog
}

// A host on a real directory bucket, observed: the metrics move by what
// its actors did. A commit held at the gate is pending and lag; each
// Durable is one wait; the session's first compaction pass is counted; a
// second host's open of the actor restores it.
func TestHostMetrics(t *testing.T) {
	ctx := t.Context()
	g := buckettest.NewGate(buckettest.Dir(t), isLogKey)
	t.Cleanup(g.Release) // before the hosts' Close
	m := New()
	h := startHost(t, g, m)
	m.Watch(h)
	s := gather(t, m)
	assert.Zero(t, s.Value(t, "framectl_host_actors", "state", "open"))
	assert.Zero(t, s.Value(t, "framectl_vfs_durable_wait_seconds"))
	putsBefore := s.Value(t, "framectl_bucket_requests_total", "op", "put", "result", "ok")
	assert.Positive(t, putsBefore, "the node's lease is a put")

	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release() // released below; this for a test that fails first
	write(t, a)
	require.NoError(t, a.DB().Durable(ctx))
	s = gather(t, m)
	assert.Equal(t, 1.0, s.Value(t, "framectl_host_actors", "state", "open"), "held actors")
	assert.Equal(t, 1.0, s.Value(t, "framectl_host_claims_total", "result", "ok"))
	assert.Equal(t, 1.0, s.Value(t, "framectl_vfs_durable_wait_seconds"), "durable waits")
	assert.Zero(t, s.Value(t, "framectl_vfs_durable_errors_total"))
	// own.json, the first snapshot, the batch: puts.
	assert.GreaterOrEqual(t, s.Value(t, "framectl_bucket_requests_total", "op", "put", "result", "ok"), putsBefore+3)
	assert.Zero(t, s.Value(t, "framectl_vfs_pending_bytes"))

	g.Hold()
	write(t, a)
	<-g.Waiting()
	s = gather(t, m)
	assert.GreaterOrEqual(t, s.Value(t, "framectl_vfs_pending_bytes"), 10000.0, "pending bytes of a 10 kB row held at the gate")
	assert.Equal(t, s.Value(t, "framectl_vfs_pending_bytes"), s.Value(t, "framectl_vfs_pending_max_bytes"))
	assert.Equal(t, 1.0, s.Value(t, "framectl_vfs_lagging_actors"))
	assert.Positive(t, s.Value(t, "framectl_vfs_lag_max_seconds"))
	g.Release()
	require.NoError(t, a.DB().Durable(ctx))
	s = gather(t, m)
	assert.Zero(t, s.Value(t, "framectl_vfs_pending_bytes"), "pending once durable")
	assert.Zero(t, s.Value(t, "framectl_vfs_lagging_actors"))
	assert.Equal(t, 2.0, s.Value(t, "framectl_vfs_durable_wait_seconds"), "durable waits")
	// Each of the two waited for an upload, then for a proof of ownership.
	assert.Equal(t, 2.0, s.Value(t, "framectl_vfs_proofs_total", "result", "ok"), "proofs")
	assert.Zero(t, s.Value(t, "framectl_vfs_proofs_total", "result", "fenced"))
	assert.Equal(t, 2.0, s.Value(t, "framectl_vfs_proof_duration_seconds"), "proofs timed")

	// The session's first compaction pass runs in the background.
	deadline := time.Now().Add(30 * time.Second)
	for gather(t, m).Value(t, "framectl_vfs_compactions_total", "result", "ok") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no compaction pass counted within 30 s of the actor's open")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s = gather(t, m)
	assert.Equal(t, s.Value(t, "framectl_vfs_compactions_total", "result", "ok"), s.Value(t, "framectl_vfs_compaction_duration_seconds"))
	assert.Zero(t, s.Value(t, "framectl_vfs_restores_total", "result", "ok"), "a new actor restores nothing")

	// Released by Close, the actor opens on another host, from the bucket.
	a.Release()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, h.Close(cctx))
	m2 := New()
	h2 := startHost(t, g, m2)
	m2.Watch(h2)
	a2, err := h2.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a2.Release()
	s = gather(t, m2)
	assert.Equal(t, 1.0, s.Value(t, "framectl_vfs_restores_total", "result", "ok"), "restores")
	assert.Zero(t, s.Value(t, "framectl_vfs_restores_total", "result", "error"))
	assert.Equal(t, 1.0, s.Value(t, "framectl_vfs_restore_duration_seconds"), "restores timed")
	assert.Equal(t, 1.0, s.Value(t, "framectl_host_actors", "state", "open"))
}
