package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
)

// scraped is one scrape of /metrics, parsed, by metric name.
type scraped map[string]*dto.MetricFamily

// scrapeMetrics GETs the node's /metrics over HTTP and parses the text
// exposition.
func scrapeMetrics(t *testing.T, h *inproc) scraped {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+h.addr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), "Content-Type %q", resp.Header.Get("Content-Type"))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "parsing /metrics")
	return fams
}

// value is the series of name with exactly labels (name, value pairs): a
// counter's or gauge's value, a histogram's sample count.
func (s scraped) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	f, ok := s[name]
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		want := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("/metrics has no %s%v", name, labels)
	return 0
}

// GET /metrics serves the node's Prometheus metrics: a real actorhost on a
// directory bucket, scraped over HTTP before and after some requests, and
// its figures moved by exactly what the requests did.
func TestMetrics(t *testing.T) {
	ctx := t.Context()
	h := startInProcess(t, buckettest.Dir(t), "")
	before := scrapeMetrics(t, h)
	assert.Zero(t, before.value(t, "framectl_host_actors", "state", "open"), "held actors before any request")
	assert.Zero(t, before.value(t, "framectl_vfs_durable_wait_seconds"), "durable waits before any request")
	assert.Zero(t, before.value(t, "framectl_host_claims_total", "result", "ok"))
	puts := before.value(t, "framectl_bucket_requests_total", "op", "put", "result", "ok")
	assert.Positive(t, puts, "the node's lease is a put")
	assert.Positive(t, before.value(t, "go_goroutines"), "the Go collector")

	const writes = 5
	for i := range writes {
		r := do(ctx, http.MethodPost, h.url("m", "a", "notes"), fmt.Sprintf("note %d", i))
		require.Equal(t, http.StatusOK, r.status, "%v", r)
	}
	r := do(ctx, http.MethodGet, h.url("m", "a", "notes"), "")
	require.Equal(t, http.StatusOK, r.status, "%v", r)

	after := scrapeMetrics(t, h)
	assert.Equal(t, 1.0, after.value(t, "framectl_host_actors", "state", "open"), "held actors")
	assert.Equal(t, 1.0, after.value(t, "framectl_host_claims_total", "result", "ok"), "claims")
	// Every answer waited at the output gate once.
	assert.Equal(t, float64(writes+1), after.value(t, "framectl_vfs_durable_wait_seconds"), "durable waits")
	assert.Zero(t, after.value(t, "framectl_vfs_durable_errors_total"))
	// Each acknowledged write is at least one batch uploaded, besides the
	// claim and the session's first snapshot.
	assert.GreaterOrEqual(t, after.value(t, "framectl_bucket_requests_total", "op", "put", "result", "ok"), puts+writes+2, "puts")
	var putRequests float64
	for _, res := range []string{"ok", "not_found", "precondition", "canceled", "error"} {
		putRequests += after.value(t, "framectl_bucket_requests_total", "op", "put", "result", res)
	}
	assert.Equal(t, putRequests, after.value(t, "framectl_bucket_request_duration_seconds", "op", "put"), "puts timed")
	assert.Zero(t, after.value(t, "framectl_vfs_pending_bytes"), "pending once every answer is durable")
}
