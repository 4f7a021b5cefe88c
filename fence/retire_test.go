package fence

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
)

// A node that starts on a follower store fences the leases other
// processes of that store left (a crash leaves its lease behind): to a
// fresh observer they look alive until it has watched them for
// Lease+Grace, and would be taken for the store's live process. Leases of
// other followers, and the node's own, are left alone.
func TestRetirePredecessors(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		withFollower := func(addr, peer, follower string) *Node {
			n, err := Register(ctx, b, addr, Options{Clock: newFakeClock(), Lease: 10 * time.Second, Grace: 5 * time.Second,
				PeerAddress: peer, Follower: follower})
			require.NoError(t, err)
			t.Cleanup(func() { n.Close(context.Background()) })
			return n
		}
		const store, other = "00112233aabbccdd", "99887766ffeeddcc"
		old := withFollower("127.0.0.1:9001", "127.0.0.1:7001", store)
		neighbour := withFollower("127.0.0.1:9002", "127.0.0.1:7002", other)
		plain := register(t, b, "127.0.0.1:9003", newFakeClock())
		fresh := withFollower("127.0.0.1:9004", "127.0.0.1:7004", store)

		before, err := NewObserver(b, Options{}).LiveNodes(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{old.ID(), neighbour.ID(), plain.ID(), fresh.ID()}, leaseIDs(before),
			"a fresh observer takes the old lease for a live one")

		fenced, err := fresh.RetirePredecessors(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{old.ID()}, fenced)
		after, err := NewObserver(b, Options{}).LiveNodes(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{neighbour.ID(), plain.ID(), fresh.ID()}, leaseIDs(after))
		l, _, err := ReadLease(ctx, b, old.ID())
		require.NoError(t, err)
		require.True(t, l.Fenced)

		again, err := fresh.RetirePredecessors(ctx)
		require.NoError(t, err)
		require.Empty(t, again, "a fenced lease is not fenced twice")
		none, err := plain.RetirePredecessors(ctx)
		require.NoError(t, err)
		require.Empty(t, none, "a node without a follower store has no predecessors")
	})
}
