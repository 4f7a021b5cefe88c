package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run hosts inside the test process (run, as main does), so
// the race detector sees the actor map, the open-once logic, hibernation
// and the drain under concurrent requests.

// inproc is a host running in this process.
type inproc struct {
	addr, id string
	data     string
	log      *syncBuffer
	cancel   context.CancelFunc
	done     chan int
	p        *proc // for the client helpers: addr and slot
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startInProcess(t *testing.T, b bucket.Bucket, data string, flags ...string) *inproc {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &inproc{data: data, log: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	pr, pw := io.Pipe()
	args := append([]string{"-listen", "127.0.0.1:0", "-bucket", b.String(), "-data", data, "-lease", "1s", "-grace", "500ms"}, flags...)
	go func() {
		code := run(ctx, args, pw, h.log)
		pw.Close()
		h.done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("host did not start: %v\n%s", err, h.log)
	}
	go io.Copy(io.Discard, pr)
	f := strings.Fields(line)
	require.Len(t, f, 4, "host printed %q", line)
	h.addr, h.id = f[1], f[3]
	h.p = &proc{addr: h.addr, id: h.id, exited: make(chan struct{})}
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("log of in-process host %s:\n%s", h.id, h.log)
		}
	})
	return h
}

// stop cancels the host's context (SIGTERM) and returns its exit code.
func (h *inproc) stop() int {
	h.cancel()
	code := <-h.done
	h.done <- code // for the next caller
	return code
}

func (h *inproc) url(ns, id, op string) string { return actorURL(h.p, ns, id, op) }

func ownRecord(t testing.TB, b bucket.Bucket, ns, id string) fence.Record {
	t.Helper()
	a := actorOf(ns, id)
	data, _, err := bucket.ReadAll(t.Context(), b, a.OwnKey(), fence.MaxRecordBytes)
	require.NoError(t, err)
	rec, err := fence.ParseRecord(a.OwnKey(), data)
	require.NoError(t, err)
	return rec
}

// Many requests for an actor nobody holds, all at once: it is opened once,
// every write lands exactly once, and every answer names epoch 1.
func TestOpenOnceUnderConcurrentRequests(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := startInProcess(t, b, "")
	const actors, perActor = 5, 24
	var wg sync.WaitGroup
	type result struct {
		actor string
		r     reply
	}
	results := make(chan result, actors*perActor*2)
	for i := range actors {
		id := fmt.Sprintf("a%d", i)
		for k := range perActor {
			wg.Add(1)
			go func() {
				defer wg.Done()
				op, body := "counter", ""
				if k%2 == 1 {
					op, body = "notes", fmt.Sprintf("note %d", k)
				}
				results <- result{id, do(ctx, http.MethodPost, h.url("c", id, op), body)}
				results <- result{id, do(ctx, http.MethodGet, h.url("c", id, "notes"), "")}
			}()
		}
	}
	wg.Wait()
	close(results)
	counters := map[string][]int64{}
	for res := range results {
		r := res.r
		require.NoError(t, r.err, "%s: %v", res.actor, r)
		require.Equal(t, http.StatusOK, r.status, "%s: %v", res.actor, r)
		if r.epoch != 1 || r.node != h.id {
			t.Errorf("%s: answered by %s in epoch %d", res.actor, r.node, r.epoch)
		}
		var v struct{ Value int64 }
		if json.Unmarshal(r.body, &v) == nil && v.Value > 0 {
			counters[res.actor] = append(counters[res.actor], v.Value)
		}
	}
	for id, vs := range counters {
		slices.Sort(vs)
		for i, v := range vs {
			require.Equal(t, int64(i+1), v, "%s: counter values %v: not 1..%d once each", id, vs, len(vs))
		}
		inv, err := restore.Take(ctx, b, actorOf("c", id))
		require.NoError(t, err)
		assert.Len(t, inv.Sessions, 1, "%s: sessions in the bucket", id)
		assert.Equal(t, frames.Epoch(1), inv.Sessions[0].Epoch, "%s: sessions in the bucket", id)
	}
	if n := strings.Count(h.log.String(), `msg="actor open"`); n != actors {
		t.Errorf("%d opens logged for %d actors", n, actors)
	}
}

// A request for an actor another node holds is forwarded there once; a
// request already forwarded is never forwarded again.
func TestForwarding(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	a := startInProcess(t, b, "")
	bb := startInProcess(t, b, "")
	if r := do(ctx, http.MethodPost, a.url("f", "x", "notes"), "one"); r.status != http.StatusOK || r.node != a.id {
		t.Fatalf("via its holder: %v (node %s)", r, r.node)
	}
	r := do(ctx, http.MethodPost, bb.url("f", "x", "notes"), "two")
	if r.status != http.StatusOK || r.node != a.id || r.via != bb.id {
		t.Fatalf("via the other node: %v, served by %q via %q", r, r.node, r.via)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, bb.url("f", "x", "notes"), nil)
	req.Header.Set(hdrForwarded, "someone")
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || resp.Header.Get(hdrVia) != "" {
		t.Fatalf("a forwarded request for an actor held elsewhere: %d, Retry-After %q, via %q",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(hdrVia))
	}
	notes, _ := json.Marshal([]note{{1, "one"}, {2, "two"}})
	r = do(ctx, http.MethodGet, bb.url("f", "x", "notes"), "")
	require.Equal(t, http.StatusOK, r.status, "notes via the other node: %v", r)
	require.Equal(t, string(notes), strings.TrimSpace(string(r.body)), "notes via the other node: %v", r)
}

// An idle actor is released (hibernates), and the next request anywhere
// claims it with the next epoch and everything written before.
func TestIdleActorsHibernate(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	a := startInProcess(t, b, "", "-idle", "100ms")
	bb := startInProcess(t, b, "")
	for i := range 3 {
		r := do(ctx, http.MethodPost, a.url("h", "x", "counter"), "")
		require.Equal(t, http.StatusOK, r.status, "write %d: %v", i, r)
	}
	if !waitFor(ctx, hangGuard, func() bool { return ownRecord(t, b, "h", "x").Released() }) {
		t.Fatal("the idle actor was not released")
	}
	r := do(ctx, http.MethodPost, bb.url("h", "x", "counter"), "")
	if r.status != http.StatusOK || r.node != bb.id || r.epoch != 2 || strings.TrimSpace(string(r.body)) != `{"value":4}` {
		t.Fatalf("after hibernation: %v from %s in epoch %d", r, r.node, r.epoch)
	}
}

// SIGTERM (the context) drains: the actors are released, the lease is
// deleted, the data directory is free for the next process, exit 0.
func TestDrainReleasesAndDeregisters(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	a := startInProcess(t, b, "")
	for _, id := range []string{"x", "y"} {
		if r := do(ctx, http.MethodPost, a.url("d", id, "notes"), "kept"); r.status != http.StatusOK {
			t.Fatal(r)
		}
	}
	if code := a.stop(); code != exitOK {
		t.Fatalf("exit code %d\n%s", code, a.log)
	}
	for _, id := range []string{"x", "y"} {
		if rec := ownRecord(t, b, "d", id); !rec.Released() || rec.Epoch != 1 {
			t.Errorf("%s: own.json after the drain: %+v", id, rec)
		}
	}
	_, err := b.Stat(ctx, frames.NodeKey(a.id))
	assert.ErrorIs(t, err, bucket.ErrNotFound, "the lease is still there")
	again := startInProcess(t, b, a.data) // the lock on -data is free
	if r := do(ctx, http.MethodGet, again.url("d", "x", "notes"), ""); r.status != http.StatusOK || r.epoch != 2 {
		t.Fatalf("reopened: %v (epoch %d)", r, r.epoch)
	}
}

// fenceNode fences node id's lease as a peer would: rewritten fenced,
// If-Match.
func fenceNode(t *testing.T, b bucket.Bucket, id string) {
	t.Helper()
	ctx := t.Context()
	key := frames.NodeKey(id)
	for {
		data, info, err := bucket.ReadAll(ctx, b, key, fence.MaxRecordBytes)
		require.NoError(t, err)
		l, err := fence.ParseLease(key, data)
		require.NoError(t, err)
		l.Fenced = true
		body := l.Marshal()
		if _, err := b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: info.ETag}); err == nil {
			return
		} else if !errors.Is(err, bucket.ErrPrecondition) {
			t.Fatal(err)
		}
	}
}

// With -recover=false, a node whose lease a peer fenced answers 503 and
// exits 3.
func TestFencedNodeExits(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	a := startInProcess(t, b, "", "-recover=false")
	if r := do(ctx, http.MethodPost, a.url("z", "x", "notes"), "before"); r.status != http.StatusOK {
		t.Fatal(r)
	}
	fenceNode(t, b, a.id)
	select {
	case code := <-a.done:
		a.done <- code
		require.Equal(t, exitFenced, code, "exit code")
	case <-time.After(hangGuard):
		t.Fatal("the fenced node kept running")
	}
	if r := do(ctx, http.MethodPost, a.url("z", "x", "notes"), "after"); r.err == nil && r.status == http.StatusOK {
		t.Fatalf("the fenced node acknowledged a write: %v", r)
	}
	if rec := ownRecord(t, b, "z", "x"); rec.Released() {
		t.Errorf("a fenced node released its actor: %+v", rec)
	}
}

// By default a fenced node comes back, in the same process, as a new
// node: it serves its actor again, in a new epoch, with what it wrote
// before the fence.
func TestFencedNodeRecovers(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	a := startInProcess(t, b, "")
	r := do(ctx, http.MethodPost, a.url("z", "x", "notes"), "before")
	require.Equal(t, http.StatusOK, r.status, "%v", r)
	fenceNode(t, b, a.id)
	// It learns of the fence at its next renewal, and registers anew.
	if !waitFor(ctx, hangGuard, func() bool {
		var st struct{ Node string }
		r := do(ctx, http.MethodGet, "http://"+a.addr+"/status", "")
		return r.status == http.StatusOK && json.Unmarshal(r.body, &st) == nil && st.Node != a.id
	}) {
		t.Fatalf("the node did not come back as a new node\n%s", a.log)
	}
	var after reply
	if !waitFor(ctx, hangGuard, func() bool {
		after = do(ctx, http.MethodPost, a.url("z", "x", "notes"), "after")
		return after.status == http.StatusOK
	}) {
		t.Fatalf("the node did not serve again after the fence: %v\n%s", after, a.log)
	}
	assert.NotEqual(t, a.id, after.node, "the node that served after the fence")
	assert.Greater(t, after.epoch, r.epoch)
	select {
	case code := <-a.done:
		a.done <- code
		t.Fatalf("the node exited with %d", code)
	default:
	}
	notes, _ := json.Marshal([]note{{1, "before"}, {2, "after"}})
	got := do(ctx, http.MethodGet, a.url("z", "x", "notes"), "")
	require.Equal(t, http.StatusOK, got.status, "%v", got)
	assert.JSONEq(t, string(notes), string(got.body))
}

func TestBadRequests(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := startInProcess(t, b, "")
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/actor/a.b/x/notes", "x", http.StatusBadRequest},
		{"POST", "/actor/" + strings.Repeat("n", 65) + "/x/notes", "x", http.StatusBadRequest},
		{"POST", "/actor/ns/" + strings.Repeat("i", 129) + "/notes", "x", http.StatusBadRequest},
		{"POST", "/actor/ns/x/notes", "\xff", http.StatusBadRequest},
		{"POST", "/actor/ns/x/notes", strings.Repeat("n", maxNoteBytes+1), http.StatusRequestEntityTooLarge},
		{"DELETE", "/actor/ns/x/notes", "", http.StatusMethodNotAllowed},
		{"GET", "/actor/ns/x/other", "", http.StatusNotFound},
	} {
		r := do(ctx, c.method, "http://"+h.addr+c.path, c.body)
		assert.Equal(t, c.status, r.status, "%s %.60s: %v", c.method, c.path, r)
	}
}

// Two processes on one data directory: the second refuses to start.
func TestDataDirectoryIsExclusive(t *testing.T) {
	b := buckettest.Dir(t)
	a := startInProcess(t, b, "")
	args := []string{"-listen", "127.0.0.1:0", "-bucket", b.String(), "-data", a.data}
	cfg, err := parseConfig(args, io.Discard)
	require.NoError(t, err)
	_, err = newServer(t.Context(), cfg, b, "127.0.0.1:1", slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, host.ErrLocked)
	var stderr syncBuffer
	code := run(t.Context(), args, io.Discard, &stderr)
	require.Equal(t, exitFailure, code, "exit code of a second process on %s\n%s", a.data, stderr.String())
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-bucket", "file:///tmp/x"},
		{"-bucket", "file:///tmp/x", "-data", "/tmp/d", "-lease", "0s"},
		{"-bucket", "file:///tmp/x", "-data", "/tmp/d", "-listen", "nonsense"},
		{"-bucket", "file:///tmp/x", "-data", "/tmp/d", "extra"},
		{"-bucket", "file:///tmp/x", "-data", "/tmp/d", "-advertise", "0.0.0.0:80"},
	} {
		var stderr syncBuffer
		if code := run(t.Context(), args, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "try:") {
			t.Errorf("%q: exit %d\n%s", args, code, stderr.String())
		}
	}
}
