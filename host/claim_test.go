package host

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// The holder, a real process, is killed (SIGKILL) with the actor open: it
// releases nothing, and its own.json and lease stay as they were. A
// request for the actor through another node is not answered 503: the
// forward finds the holder's port closed, and the node retries its claim
// until the dead holder's lease plus grace has run out on its clock, then
// serves the actor with everything the dead holder acknowledged.
func TestRequestWaitsOutKilledHolder(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			c := startChild(t, b, t.TempDir(), "x")
			heir := startServed(t, b, Config{}, HandlerOptions{})
			c.kill()
			r := do(t, http.MethodPost, heir.addr, "ns", "x", "after the kill", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.Equal(t, heir.Node().ID(), r.node, "served by")
			assert.Equal(t, c.epoch+1, r.epoch, "epoch")
			r = do(t, http.MethodGet, heir.addr, "ns", "x", "", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.JSONEq(t, `["from the child","after the kill"]`, r.body)
			st := heir.Stats()
			assert.Equal(t, int64(1), st.PeersFenced, "peers fenced")
			assert.Equal(t, int64(1), st.Claims.OK, "claims")
			assert.Zero(t, st.Claims.Failed, "failed claims")
		})
	}
}

// The holder is killed and its lease deleted (by hand, or a sweep on a
// skewed clock): a claim must wait Lease+Grace after it first saw the
// lease missing (fence.ErrHolderUnseen), and Acquire retries it until
// then, within the caller's context.
func TestAcquireWaitsOutHolderWithoutLease(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			c := startChild(t, b, t.TempDir(), "x")
			c.kill()
			require.NoError(t, b.Delete(ctx, frames.NodeKey(c.node)))
			h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			actx, cancel := context.WithTimeout(ctx, hangGuard)
			defer cancel()
			a, err := h.Acquire(actx, "ns", []byte("x"))
			require.NoError(t, err)
			defer a.Release()
			assert.Equal(t, c.epoch+1, a.Epoch())
			notes, err := listNotes(ctx, a.Actor)
			require.NoError(t, err)
			assert.Equal(t, []string{"from the child"}, notes)
		})
	}
}

// A caller's context bounds the retries: it ends, and the error says both
// why it ended and what the last attempt met.
func TestAcquireRetriesEndWithTheContext(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	c := startChild(t, b, t.TempDir(), "x")
	c.kill()
	require.NoError(t, b.Delete(ctx, frames.NodeKey(c.node)))
	// Lease+Grace of a minute: the claim cannot succeed within the test.
	h := newHost(t, b, Config{Lease: 40 * time.Second, Grace: 20 * time.Second, Hooks: (&notesHooks{}).hooks()})
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := h.Acquire(actx, "ns", []byte("x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, fence.ErrHolderUnseen)
	claims := h.Stats().Claims
	assert.Positive(t, claims.Waiting, "claims waiting for the holder's lease")
	assert.Zero(t, claims.OK+claims.Held+claims.Failed, "other claims")
}
