package fence

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

func leaseIDs(ls []Lease) []string {
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.Node)
	}
	return ids
}

// LiveNodes lists the nodes the observer judges alive, with their peer
// addresses, sorted by ID: not a closed node, not a fenced one, not one
// whose heartbeat stood still for Lease+Grace. A damaged lease names no
// candidate and is reported; more leases than the bound is an error.
func TestLiveNodes(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		co := newFakeClock()
		o := register(t, b, "127.0.0.1:9001", co)
		dead := register(t, b, "127.0.0.1:9002", newFakeClock())  // never renews; fenced below
		stale := register(t, b, "127.0.0.1:9003", newFakeClock()) // never renews; left expired
		closed := register(t, b, "127.0.0.1:9004", newFakeClock())
		for _, n := range []*Node{dead, stale, closed} {
			_, _, err := o.Observer.Judge(ctx, n.ID())
			require.NoError(t, err)
		}
		all, err := o.Observer.LiveNodes(ctx)
		require.NoError(t, err)
		require.Len(t, all, 4, "before anyone stopped: %v", leaseIDs(all))

		require.NoError(t, closed.Close(ctx))
		renewFor(t, b, o, co, o.opts.Lease+o.opts.Grace)
		live, err := o.Observer.Fence(ctx, dead.ID())
		require.NoError(t, err)
		require.Equal(t, Fenced, live)
		fresh := make([]*Node, 2)
		for i := range fresh {
			n, err := Register(ctx, b, fmt.Sprintf("127.0.0.1:%d", 9005+i), Options{Clock: newFakeClock(), PeerAddress: fmt.Sprintf("127.0.0.1:%d", 7005+i), Follower: fmt.Sprintf("f%d", i)})
			require.NoError(t, err)
			t.Cleanup(func() { n.Close(t.Context()) })
			fresh[i] = n
		}

		got, err := o.Observer.LiveNodes(ctx)
		require.NoError(t, err)
		want := []string{o.ID(), fresh[0].ID(), fresh[1].ID()}
		slices.Sort(want)
		require.Equal(t, want, leaseIDs(got), "live nodes")
		for _, l := range got {
			for i, n := range fresh {
				if l.Node == n.ID() {
					require.Equal(t, fmt.Sprintf("127.0.0.1:%d", 7005+i), l.Peer, "peer address of %s", l.Node)
				}
			}
		}

		// A damaged lease and a stray key: the live nodes still, and an
		// error naming each.
		damaged := frames.NodeKey("ffffffffffffffffffffffffffffffff")
		putBytes(t, b, damaged, []byte(`{"node":"ffffffffffffffffffffffffffffffff","address":"nohost","heartbeat":1,"fenced":false}`))
		stray := frames.NodesPrefix + "stray"
		putTiny(t, b, stray)
		got, err = o.Observer.LiveNodes(ctx)
		require.ErrorIs(t, err, ErrBadLease, "with a damaged lease")
		require.Contains(t, err.Error(), damaged, "the error names the damaged lease")
		require.Contains(t, err.Error(), stray, "the error names the stray key")
		require.Equal(t, want, leaseIDs(got), "live nodes beside a damaged lease")
		require.NoError(t, b.DeleteMany(ctx, []string{damaged, stray}))

		// The bound: every lease read counts, live or not (5 remain:
		// o, dead, stale, two fresh).
		_, err = o.Observer.liveNodes(ctx, 5)
		require.NoError(t, err, "as many leases as the bound")
		got, err = o.Observer.liveNodes(ctx, 4)
		require.Error(t, err, "more leases than the bound")
		require.Nil(t, got, "more leases than the bound")
	})
}

// LiveNodes pages through a listing longer than a page (at the bucket's
// default page size).
func TestLiveNodesPastAPage(t *testing.T) {
	const leases = 1100
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		o := register(t, b, "127.0.0.1:9001", newFakeClock())
		want := []string{o.ID()}
		objs := map[string][]byte{}
		for i := range leases {
			id := fmt.Sprintf("%032x", i)
			want = append(want, id)
			objs[frames.NodeKey(id)] = Lease{Node: id, Address: "127.0.0.1:1", Heartbeat: 1}.Marshal()
		}
		putAll(t, b, objs)
		slices.Sort(want)
		got, err := o.Observer.LiveNodes(ctx)
		require.NoError(t, err)
		ids := leaseIDs(got)
		require.Len(t, ids, len(want))
		if !slices.Equal(want, ids) {
			t.Fatalf("live nodes differ from the %d leases (first %s, last %s)", len(want), strings.Join(ids[:2], ","), ids[len(ids)-1])
		}
	})
}
