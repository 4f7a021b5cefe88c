package host

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// A request for an actor another live node holds is forwarded there once:
// the holder serves it, the answer says who forwarded it. A request that
// arrives forwarded at a node that does not hold the actor is answered
// 503 + Retry-After and never forwarded again.
func TestForwardAtMostOnce(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			holder := startServed(t, b, Config{}, HandlerOptions{})
			other := startServed(t, b, Config{}, HandlerOptions{})
			r := do(t, http.MethodPost, holder.addr, "ns", "x", "one", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)

			r = do(t, http.MethodPost, other.addr, "ns", "x", "two", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.Equal(t, holder.Node().ID(), r.node, "served by")
			assert.Equal(t, other.Node().ID(), r.via, "forwarded by")
			assert.Equal(t, int64(1), holder.forwarded.Load(), "forwarded requests the holder got")
			assert.Equal(t, int64(2), holder.served.Load())

			// Forwarded already (by a node that thought other holds x).
			r = do(t, http.MethodGet, other.addr, "ns", "x", "", http.Header{HeaderForwarded: {"someone"}})
			assert.Equal(t, http.StatusServiceUnavailable, r.status, "%v", r)
			assert.Equal(t, "1", r.retryAfter)
			assert.Empty(t, r.via, "a forwarded request was forwarded again")
			assert.Equal(t, int64(1), holder.forwarded.Load(), "forwarded requests the holder got")
			assert.Equal(t, int64(0), other.served.Load())
			assert.Equal(t, int64(1), other.forwarded.Load(), "forwarded requests other got: the one sent marked")

			r = do(t, http.MethodGet, other.addr, "ns", "x", "", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.JSONEq(t, `["one","two"]`, r.body)
		})
	}
}

// A predecessor of this node at its own address (a process killed and
// restarted there) holds the actor: its lease is still there but no longer
// renewed. The node never forwards to itself, whether own.json or only the
// predecessor's lease (which is what forwarding trusts) names this
// address: it claims the actor once the predecessor's lease plus grace has
// run out.
func TestNeverForwardsToItself(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ownsAddr bool // own.json names this node's address too
	}{
		{"own.json and lease", true},
		{"lease only", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			b := buckettest.Dir(t)
			s := startServed(t, b, Config{}, HandlerOptions{})
			recorded := "127.0.0.1:9" // nobody serves there
			if tc.ownsAddr {
				recorded = s.addr
			}
			pred := writeDeadHolder(t, b, s.addr, recorded, "ns", "x")
			r := do(t, http.MethodPost, s.addr, "ns", "x", "note", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.Equal(t, s.Node().ID(), r.node)
			assert.Equal(t, frames.Epoch(2), r.epoch)
			assert.Equal(t, int64(0), s.forwarded.Load(), "requests the node forwarded to itself")
			l, _, err := fence.ReadLease(ctx, b, pred)
			require.NoError(t, err)
			assert.True(t, l.Fenced, "the predecessor's lease after the takeover")
		})
	}
}

// writeDeadHolder makes actor ns/id held, at epoch 1, by a node whose
// lease says it serves at addr and whose own.json record says recorded,
// and that renews its lease no more, as a killed process leaves it; it
// returns that node's ID.
func writeDeadHolder(t *testing.T, b bucket.Bucket, addr, recorded, ns, id string) string {
	t.Helper()
	ctx := t.Context()
	raw := make([]byte, 16)
	rand.Read(raw)
	node := hex.EncodeToString(raw)
	lease := fence.Lease{Node: node, Address: addr, Heartbeat: 7}.Marshal()
	_, err := b.Put(ctx, frames.NodeKey(node), bytesReader(lease), int64(len(lease)), bucket.Condition{IfAbsent: true})
	require.NoError(t, err)
	a := actorOf(ns, id)
	rec := fence.Record{Epoch: 1, Node: node, Address: recorded}.Marshal()
	_, err = b.Put(ctx, a.OwnKey(), bytesReader(rec), int64(len(rec)), bucket.Condition{IfAbsent: true})
	require.NoError(t, err)
	return node
}

// A client that sends headers and then stalls its body holds no actor: the
// body is read before the actor is acquired, and the read ends at
// BodyTimeout with 408.
func TestSlowBodyDoesNotHoldTheActor(t *testing.T) {
	b := buckettest.Dir(t)
	s := startServed(t, b, Config{}, HandlerOptions{BodyTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /actor/ns/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nthe first bytes"))
	require.NoError(t, err)
	conn.SetReadDeadline(time.Now().Add(hangGuard))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Equal(t, int64(0), s.hooks.opened.Load(), "actors opened for the stalled request")
	assert.Empty(t, s.Actors())
	assert.Equal(t, int64(0), s.served.Load())
}

// A request whose body arrived in time keeps its context while it is
// served past BodyTimeout (a claim waiting out a dead holder's lease, a
// slow Durable): the body's read deadline ends with the body. Left on the
// connection, it fails net/http's background read of it (which watches
// for the client leaving, and starts at once for a request without a
// body), that cancels the request's context, and the answer is lost.
func TestServingOutlastsBodyTimeout(t *testing.T) {
	b := buckettest.Dir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h, err := New(t.Context(), testConfig(t, b, ln.Addr().String(), Config{}))
	require.NoError(t, err)
	handler := h.Handler(HandlerOptions{
		BodyTimeout: 200 * time.Millisecond,
		Route:       func(*http.Request) (string, []byte, error) { return "ns", []byte("slow"), nil },
		Serve: func(w http.ResponseWriter, r *http.Request, _ *Handle) {
			select {
			case <-time.After(800 * time.Millisecond):
				fmt.Fprint(w, "served")
			case <-r.Context().Done():
				fmt.Fprintf(w, "context ended: %v", r.Context().Err())
			}
		},
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		h.Close(context.Background())
	})
	client := &http.Client{Timeout: hangGuard}
	for _, body := range []io.Reader{nil, strings.NewReader("a body")} {
		resp, err := client.Post("http://"+ln.Addr().String()+"/", "text/plain", body)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "served", string(got))
	}
}
