package metrics

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/metrics/metricstest"
	"github.com/framectl/framectl/quorum"
)

func clusterKey(t *testing.T) []byte {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

// collectQuorum is what quorumDescs make of p: each series' value by its
// name and labels ("name{label=value}").
func collectQuorum(t *testing.T, p *host.PeerStats) map[string]float64 {
	t.Helper()
	got, summaries := collected(t, func(ch chan<- prometheus.Metric) { newQuorumDescs().collect(ch, p) })
	require.Empty(t, summaries)
	return got
}

// Every field of host.PeerStats reaches its series.
func TestPeerStatsExposed(t *testing.T) {
	p := &host.PeerStats{
		Hub:              quorum.Stats{Sessions: 1, Takeovers: 2, TailsRecovered: 3, Superseded: 4, Late: 5, SendErrors: 6, StoreErrors: 7, Fences: 8, Replaced: 19, Unproven: 20, ClaimReadErrors: 21},
		AckedByFollowers: 9, AckedByBucket: 10, Entries: 11, Backpressure: 12,
		WithFollowers: 13, Followers: 40, Failed: 14, BelowQuorum: 15,
		LagSum: 16, LagMax: 17, StoreBytes: 18,
	}
	assert.Equal(t, map[string]float64{
		"framectl_quorum_sessions":                 1,
		"framectl_quorum_unproven_total":           20,
		"framectl_quorum_claim_read_errors_total":  21,
		"framectl_quorum_takeovers_total":          2,
		"framectl_quorum_tails_recovered_total":    3,
		"framectl_quorum_superseded_total":         4,
		"framectl_quorum_late_replies_total":       5,
		"framectl_quorum_send_errors_total":        6,
		"framectl_quorum_store_errors_total":       7,
		"framectl_quorum_fences_promised_total":    8,
		"framectl_quorum_followers_replaced_total": 19,
		"framectl_quorum_acks_total{by=followers}": 9,
		"framectl_quorum_acks_total{by=bucket}":    10,
		"framectl_quorum_entries_total":            11,
		"framectl_quorum_backpressure_total":       12,
		"framectl_quorum_actors_with_followers":    13,
		"framectl_quorum_followers{state=active}":  26,
		"framectl_quorum_followers{state=failed}":  14,
		"framectl_quorum_below_quorum_actors":      15,
		"framectl_quorum_follower_lag_sum_commits": 16,
		"framectl_quorum_follower_lag_max_commits": 17,
		"framectl_quorum_store_bytes":              18,
	}, collectQuorum(t, p))
}

// Every field of quorum.Stats, the hub's, is exposed: each set to a value
// of its own, each value is some series'. A field added to quorum.Stats
// fails this until it has its series.
func TestQuorumStatsAllExposed(t *testing.T) {
	var st quorum.Stats
	v := reflect.ValueOf(&st).Elem()
	want := map[float64]string{}
	for i := range v.NumField() {
		f := v.Field(i)
		val := int64(1000 + i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(val)
		default:
			t.Fatalf("quorum.Stats.%s is a %s: give it its series", v.Type().Field(i).Name, f.Kind())
		}
		want[float64(val)] = v.Type().Field(i).Name
	}
	seen := map[float64]bool{}
	for _, val := range collectQuorum(t, &host.PeerStats{Hub: st}) {
		seen[val] = true
	}
	for val, field := range want {
		assert.True(t, seen[val], "quorum.Stats.%s has no series", field)
	}
}

// peerCluster starts n hosts in peer mode on one directory bucket, each
// observed by its own Metrics.
func peerCluster(t *testing.T, n int) ([]*host.Host, []*Metrics) {
	t.Helper()
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	key := clusterKey(t)
	hs, ms := make([]*host.Host, n), make([]*Metrics, n)
	for i := range hs {
		ms[i] = New()
		hs[i] = startPeerHost(t, b, ms[i], fmt.Sprintf("127.0.0.1:%d", i+1), &host.PeersConfig{Listen: "127.0.0.1:0", Key: key})
		ms[i].Watch(hs[i])
	}
	return hs, ms
}

// until gathers m until cond holds of a scrape, for a generous while.
func until(t *testing.T, m *Metrics, what string, cond func(metricstest.Scrape) bool) metricstest.Scrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := gather(t, m)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Four hosts in peer mode: the owner of an actor, and its three followers.
// Its metrics count every Durable as acknowledged by the followers, the
// three followers in the actor's set, and their lag at 0 once each holds
// every commit; a follower's store holds the actor's tail. One follower
// host closed, the other two still acknowledge, and the closed one lacks
// exactly the commits made since: the lag gauges say so.
func TestPeerMetrics(t *testing.T) {
	ctx := t.Context()
	hs, ms := peerCluster(t, 4)
	s := gather(t, ms[0])
	assert.Zero(t, s.Value(t, "framectl_quorum_acks_total", "by", "followers"))
	assert.Zero(t, s.Value(t, "framectl_quorum_sessions"))
	assert.Zero(t, s.Value(t, "framectl_quorum_store_bytes"), "an empty follower store")

	a, err := hs[0].Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	const writes = 5
	for range writes {
		write(t, a)
		require.NoError(t, a.DB().Durable(ctx))
	}
	st := a.DB().Stats()
	s = gather(t, ms[0])
	assert.Equal(t, float64(writes), s.Value(t, "framectl_quorum_acks_total", "by", "followers"), "Durable calls answered by the followers")
	assert.Equal(t, float64(st.AckedByPeers), s.Value(t, "framectl_quorum_acks_total", "by", "followers"))
	assert.Zero(t, s.Value(t, "framectl_quorum_acks_total", "by", "bucket"))
	assert.Equal(t, float64(st.Entries), s.Value(t, "framectl_quorum_entries_total"))
	assert.GreaterOrEqual(t, s.Value(t, "framectl_quorum_entries_total"), float64(writes))
	assert.Equal(t, 1.0, s.Value(t, "framectl_quorum_sessions"))
	assert.Equal(t, 1.0, s.Value(t, "framectl_quorum_actors_with_followers"))
	assert.Equal(t, 3.0, s.Value(t, "framectl_quorum_followers", "state", "active"), "followers in the set")
	assert.Zero(t, s.Value(t, "framectl_quorum_followers", "state", "failed"))
	assert.Zero(t, s.Value(t, "framectl_quorum_below_quorum_actors"))
	until(t, ms[0], "every follower holds every commit", func(s metricstest.Scrape) bool {
		return s.Value(t, "framectl_quorum_follower_lag_sum_commits") == 0
	})
	assert.Zero(t, gather(t, ms[0]).Value(t, "framectl_quorum_follower_lag_max_commits"))
	for i, m := range ms[1:] {
		assert.Positive(t, gather(t, m).Value(t, "framectl_quorum_store_bytes"), "follower %d's store", i+1)
	}

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, hs[3].Close(cctx))
	const more = 4
	for range more {
		write(t, a)
		require.NoError(t, a.DB().Durable(ctx))
	}
	s = until(t, ms[0], "the closed follower lacks the commits since, the others none", func(s metricstest.Scrape) bool {
		return s.Value(t, "framectl_quorum_follower_lag_sum_commits") == more
	})
	assert.Equal(t, float64(more), s.Value(t, "framectl_quorum_follower_lag_max_commits"), "the closed follower's lag")
	assert.Equal(t, float64(writes+more), s.Value(t, "framectl_quorum_acks_total", "by", "followers"), "two followers still acknowledge")
	assert.Equal(t, 3.0, s.Value(t, "framectl_quorum_followers", "state", "active"), "a follower that does not answer is not failed")
	assert.Zero(t, s.Value(t, "framectl_quorum_below_quorum_actors"))
}
