package main

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/metrics/metricstest"
)

// scrapeProc GETs a node process's /metrics and parses it; an error (the
// process died meanwhile) is returned, not a test failure.
func scrapeProc(ctx context.Context, p *proc) (metricstest.Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := testClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return metricstest.ParseText(resp.Body)
}

// scrapeMetrics GETs the node's /metrics over HTTP and parses the text
// exposition.
func scrapeMetrics(t *testing.T, h *inproc) metricstest.Scrape {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+h.addr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), "Content-Type %q", resp.Header.Get("Content-Type"))
	return metricstest.Parse(t, resp.Body)
}

// GET /metrics serves the node's Prometheus metrics: a real actorhost on a
// directory bucket, scraped over HTTP before and after some requests, and
// its figures moved by exactly what the requests did.
func TestMetrics(t *testing.T) {
	ctx := t.Context()
	h := startInProcess(t, buckettest.Dir(t), "")
	before := scrapeMetrics(t, h)
	assert.Zero(t, before.Value(t, "framectl_host_actors", "state", "open"), "held actors before any request")
	assert.Zero(t, before.Value(t, "framectl_vfs_durable_wait_seconds"), "durable waits before any request")
	assert.Zero(t, before.Value(t, "framectl_host_claims_total", "result", "ok"))
	puts := before.Value(t, "framectl_bucket_requests_total", "op", "put", "result", "ok")
	assert.Positive(t, puts, "the node's lease is a put")
	assert.Positive(t, before.Value(t, "go_goroutines"), "the Go collector")

	const writes = 5
	for i := range writes {
		r := do(ctx, http.MethodPost, h.url("m", "a", "notes"), fmt.Sprintf("note %d", i))
		require.Equal(t, http.StatusOK, r.status, "%v", r)
	}
	r := do(ctx, http.MethodGet, h.url("m", "a", "notes"), "")
	require.Equal(t, http.StatusOK, r.status, "%v", r)

	after := scrapeMetrics(t, h)
	assert.Equal(t, 1.0, after.Value(t, "framectl_host_actors", "state", "open"), "held actors")
	assert.Equal(t, 1.0, after.Value(t, "framectl_host_claims_total", "result", "ok"), "claims")
	// Every answer waited at the output gate once.
	assert.Equal(t, float64(writes+1), after.Value(t, "framectl_vfs_durable_wait_seconds"), "durable waits")
	assert.Zero(t, after.Value(t, "framectl_vfs_durable_errors_total"))
	// Each acknowledged write is at least one batch uploaded, besides the
	// claim and the session's first snapshot.
	assert.GreaterOrEqual(t, after.Value(t, "framectl_bucket_requests_total", "op", "put", "result", "ok"), puts+writes+2, "puts")
	var putRequests float64
	for _, res := range []string{"ok", "not_found", "precondition", "canceled", "error"} {
		putRequests += after.Value(t, "framectl_bucket_requests_total", "op", "put", "result", res)
	}
	assert.Equal(t, putRequests, after.Value(t, "framectl_bucket_request_duration_seconds", "op", "put"), "puts timed")
	assert.Zero(t, after.Value(t, "framectl_vfs_pending_bytes"), "pending once every answer is durable")
}

// In peer mode, /metrics serves acknowledgement by followers too: four
// nodes, one actor written through the first, which owns it with the
// other three as its followers. Every answer's Durable is counted by what
// acknowledged it (the followers, for every write), and the actor's three
// followers and their lag are there.
func TestMetricsPeerMode(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	key := make([]byte, 32)
	_, err := crand.Read(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, key, 0o600))
	var hs []*inproc
	for range 4 {
		hs = append(hs, startInProcess(t, b, "", "-peer-listen", "127.0.0.1:0", "-cluster-key-file", keyFile, "-idle", "10m"))
	}
	before := scrapeMetrics(t, hs[0])
	assert.Zero(t, before.Value(t, "framectl_quorum_acks_total", "by", "followers"))

	const writes = 5
	for i := range writes {
		r := do(ctx, http.MethodPost, hs[0].url("m", "a", "notes"), fmt.Sprintf("note %d", i))
		require.Equal(t, http.StatusOK, r.status, "%v", r)
		require.Equal(t, hs[0].id, r.node, "served by the first node")
	}
	after := scrapeMetrics(t, hs[0])
	byFollowers := after.Value(t, "framectl_quorum_acks_total", "by", "followers")
	assert.GreaterOrEqual(t, byFollowers, float64(writes), "every write acknowledged by the followers")
	// Every answer waited at the output gate once, and each wait is
	// counted by what acknowledged it.
	assert.Equal(t, after.Value(t, "framectl_vfs_durable_wait_seconds"), byFollowers+after.Value(t, "framectl_quorum_acks_total", "by", "bucket"))
	assert.Equal(t, 1.0, after.Value(t, "framectl_quorum_actors_with_followers"))
	assert.Equal(t, 3.0, after.Value(t, "framectl_quorum_followers", "state", "active"), "the actor's followers")
	assert.Zero(t, after.Value(t, "framectl_quorum_followers", "state", "failed"))
	assert.GreaterOrEqual(t, after.Value(t, "framectl_quorum_follower_lag_max_commits"), 0.0, "the lag is served")
	var held float64
	for _, h := range hs[1:] {
		held += scrapeMetrics(t, h).Value(t, "framectl_quorum_store_bytes")
	}
	assert.Positive(t, held, "the followers' stores hold the actor's tail")
}
