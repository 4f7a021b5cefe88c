package host

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/session"
)

// recoveryLease is long enough that a loaded machine renews it while the
// bucket answers: only the outage may end it. At 2 s, under a load
// average of 8, the write after recovery once failed with "sqlite3: disk
// I/O error", which is what a write gets once the recovered node has lost
// its lease as well (vfs refuses it as fenced; each renewal is bounded by
// a third of the lease, so three slow ones in a row end the node). A
// recovery that works cannot be told from one that does not unless the
// lease outlasts the load: 4 s, and a refused write says why and whether
// the recovered node was lost again.
const recoveryLease, recoveryGrace = 4 * time.Second, time.Second

// loseNode takes out, the bucket under h, down until h's node is lost
// (its lease ran out), and returns that node. out stays down.
func loseNode(t *testing.T, h *Host, out *buckettest.Outage) *fence.Node {
	t.Helper()
	lost := h.Node()
	out.SetDown(true)
	select {
	case <-lost.Done():
	case <-time.After(hangGuard):
		t.Fatal("the node outlived an outage longer than its lease")
	}
	return lost
}

// The bucket is unreachable for longer than the lease: the node is lost,
// and its actors stop (an Acquire's Handle held through it sees
// session.ErrFenced). Once the bucket answers, the same host, without a
// restart, registers a new node and serves the actors again, with the
// next epoch and everything acknowledged before.
func TestRecoversAfterOutageLongerThanLease(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := buckettest.NewOutage(be.New(t))
			h := newHost(t, b, Config{Lease: recoveryLease, Grace: recoveryGrace, Hooks: (&notesHooks{}).hooks()})
			x, err := h.Acquire(ctx, "ns", []byte("x"))
			require.NoError(t, err)
			require.NoError(t, addNote(ctx, x.Actor, "before"))
			require.NoError(t, x.DB().Durable(ctx))
			epoch := x.Epoch()
			x.Release() // open, idle
			y, err := h.Acquire(ctx, "ns", []byte("y"))
			require.NoError(t, err) // held through the outage

			lost := loseNode(t, h, b)
			require.ErrorIs(t, y.DB().Durable(ctx), session.ErrFenced, "Durable of a Handle held through the outage")
			y.Release()
			b.SetDown(false)

			actx, cancel := context.WithTimeout(ctx, hangGuard)
			defer cancel()
			for _, id := range []string{"x", "y"} {
				a, err := h.Acquire(actx, "ns", []byte(id))
				require.NoError(t, err, "%s after the outage", id)
				assert.Greater(t, a.Epoch(), epoch, "%s: epoch after the outage", id)
				if id == "x" {
					notes, err := listNotes(ctx, a.Actor)
					require.NoError(t, err)
					assert.Equal(t, []string{"before"}, notes)
				}
				err = addNote(ctx, a.Actor, "after")
				require.NoError(t, err, "%s: write after the outage (refusal: %v; recovered node lost again: %v)",
					id, framectl.Refusal(err), h.Node().Err())
				require.NoError(t, a.DB().Durable(ctx), "%s: Durable after the outage (recovered node lost again: %v)", id, h.Node().Err())
				a.Release()
			}
			assert.NotEqual(t, lost.ID(), h.Node().ID(), "the node after recovery")
			assert.NoError(t, h.Err())
			st := h.Stats()
			assert.Equal(t, int64(1), st.LeasesLost, "leases lost")
			assert.Zero(t, st.NodesFenced, "nodes fenced")
			assert.Equal(t, int64(2), st.ActorsFenced, "actors dropped for the loss")
			rec := ownRecord(t, b, "ns", "x")
			assert.Equal(t, h.Node().ID(), rec.Node, "own.json of x")
		})
	}
}

// With StopOnNodeLoss the host stops when its node is lost: Done, and Err
// and Acquire say why.
func TestStopOnNodeLoss(t *testing.T) {
	ctx := t.Context()
	b := buckettest.NewOutage(buckettest.Dir(t))
	h := newHost(t, b, Config{Lease: recoveryLease, Grace: recoveryGrace, StopOnNodeLoss: true, Hooks: (&notesHooks{}).hooks()})
	x, err := h.Acquire(ctx, "ns", []byte("x"))
	require.NoError(t, err)
	x.Release()
	b.SetDown(true)
	select {
	case <-h.Done():
	case <-time.After(hangGuard):
		t.Fatal("the host kept serving without a node")
	}
	require.ErrorIs(t, h.Err(), ErrStopped)
	require.ErrorIs(t, h.Err(), fence.ErrLeaseLost)
	b.SetDown(false)
	_, err = h.Acquire(ctx, "ns", []byte("x"))
	require.ErrorIs(t, err, ErrStopped)
	cctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	require.ErrorIs(t, h.Close(cctx), fence.ErrLeaseLost, "Close after the loss")
	assert.False(t, ownRecord(t, b, "ns", "x").Released(), "a lost node released its actor")
}
