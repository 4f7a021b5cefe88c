package fence

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// A node that stopped claiming takes no actor from anyone: not an absent
// one, not a released one, not a dead holder's (which it does not fence
// either), and a live holder is still named for forwarding; an actor its
// own.json gives to this node is claimed as before, and the lease keeps
// being renewed.
func TestStopClaimingTakesNothingFromOthers(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		ca := newFakeClock()
		a := register(t, b, "127.0.0.1:9001", ca)
		live := register(t, b, "127.0.0.1:9002", newFakeClock())
		dead := register(t, b, "127.0.0.1:9003", newFakeClock()) // its clock never moves: it never renews
		actor := func(id string) frames.Actor { return frames.Actor{Namespace: testActor.Namespace, Actor: id} }
		own, absent, released, held, deadHeld := actor("a1"), actor("a2"), actor("a3"), actor("a4"), actor("a5")

		first, err := a.Claim(ctx, own, ClaimOptions{})
		require.NoError(t, err)
		o, err := live.Claim(ctx, released, ClaimOptions{})
		require.NoError(t, err)
		require.NoError(t, live.Release(ctx, o, 0))
		_, err = live.Claim(ctx, held, ClaimOptions{})
		require.NoError(t, err)
		_, err = dead.Claim(ctx, deadHeld, ClaimOptions{})
		require.NoError(t, err)
		// a sees dead's heartbeat, then waits lease+grace, renewing.
		_, _, err = a.Observer.Judge(ctx, dead.ID())
		require.NoError(t, err)
		renewFor(t, b, a, ca, a.opts.Lease+a.opts.Grace)

		a.StopClaiming()
		_, err = a.Claim(ctx, absent, ClaimOptions{})
		require.ErrorIs(t, err, ErrNotClaiming, "absent own.json")
		_, _, err = ReadRecord(ctx, b, absent)
		require.ErrorIs(t, err, bucket.ErrNotFound, "own.json of the refused absent actor")

		_, err = a.Claim(ctx, released, ClaimOptions{})
		require.ErrorIs(t, err, ErrNotClaiming, "released own.json")
		rec, _, err := ReadRecord(ctx, b, released)
		require.NoError(t, err)
		require.Equal(t, Record{Epoch: o.Epoch}, rec, "own.json of the refused released actor")

		_, err = a.Claim(ctx, held, ClaimOptions{})
		var he *HeldError
		require.ErrorAs(t, err, &he, "live holder")
		require.Equal(t, live.ID(), he.Node, "live holder")
		require.NotErrorIs(t, err, ErrNotClaiming, "live holder")

		_, err = a.Claim(ctx, deadHeld, ClaimOptions{})
		require.ErrorIs(t, err, ErrNotClaiming, "dead holder")
		require.NotErrorIs(t, err, ErrHeld, "dead holder")
		l, _, err := ReadLease(ctx, b, dead.ID())
		require.NoError(t, err)
		require.False(t, l.Fenced, "a node that stopped claiming fenced the dead holder")
		rec, _, err = ReadRecord(ctx, b, deadHeld)
		require.NoError(t, err)
		require.Equal(t, dead.ID(), rec.Node, "own.json of the dead holder's actor")

		again, err := a.Claim(ctx, own, ClaimOptions{})
		require.NoError(t, err, "own.json naming this node")
		require.Equal(t, first.Epoch+1, again.Epoch, "own.json naming this node")

		// Still renewing, still valid.
		n := func() uint64 { a.mu.Lock(); defer a.mu.Unlock(); return a.heartbeat }()
		ca.Step(a.opts.RenewEvery)
		waitHeartbeat(t, b, a, n+1)
		require.NoError(t, a.Valid())
	})
}
