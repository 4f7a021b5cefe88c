package fence

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

const leaseNode = "0123456789abcdef0123456789abcdef"

func TestLeaseRoundTrip(t *testing.T) {
	key := frames.NodeKey(leaseNode)
	for _, l := range []Lease{
		{Node: leaseNode, Address: "127.0.0.1:9000", Heartbeat: 42},
		{Node: leaseNode, Address: "127.0.0.1:9000", Heartbeat: 1, Fenced: true, Peer: "127.0.0.1:7000", Follower: "9a0b1c2d3e4f5a6b"},
		{Node: leaseNode, Address: "[::1]:1", Peer: "[::1]:2", Follower: "f1"},
	} {
		got, err := ParseLease(key, l.Marshal())
		require.NoError(t, err, "%s", l.Marshal())
		require.Equal(t, l, got, "%s", l.Marshal())
	}
	require.Equal(t, `{"node":"`+leaseNode+`","address":"h:1","heartbeat":3,"fenced":false,"peer":"h:2","follower":"f1"}`,
		string(Lease{Node: leaseNode, Address: "h:1", Heartbeat: 3, Peer: "h:2", Follower: "f1"}.Marshal()))
	// Leases written before peer existed parse, as "", and one without a
	// peer marshals without it.
	old := `{"node":"` + leaseNode + `","address":"h:1","heartbeat":3,"fenced":false}`
	l, err := ParseLease(key, []byte(old))
	require.NoError(t, err)
	require.Empty(t, l.Peer)
	require.Equal(t, old, string(l.Marshal()))
}

func TestBadLeasesRejected(t *testing.T) {
	key := frames.NodeKey(leaseNode)
	head := `{"node":"` + leaseNode + `","address":"h:1","heartbeat":3,"fenced":false`
	for _, s := range []string{
		``, `{}`, `{"node":"` + leaseNode + `","address":"h:1","heartbeat":3}`,
		head + `,"peer":""}`,
		head + `,"peer":null}`,
		head + `,"peer":"nohost"}`,
		head + `,"peer":"h:"}`,
		head + `,"peer":7000}`,
		head + `,"peer":["h:1"]}`,
		head + `,"peer":"h:2","follower":"f1","x":1}`,
		head + `,"peer":"h:2"}`,
		head + `,"follower":"f1"}`,
		head + `,"peer":"h:2","follower":""}`,
		head + `,"peer":"h:2","follower":"-x"}`,
		head + `,"peer":"h:2","follower":7}`,
	} {
		l, err := ParseLease(key, []byte(s))
		if err == nil {
			t.Errorf("%q parsed as %+v", s, l)
			continue
		}
		if !errors.Is(err, ErrBadLease) || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// A node's peer address goes into its lease at Register and stays there
// through every renewal (and a Restart); a bad one is refused before any
// lease is written.
func TestLeaseCarriesPeerAddress(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		clock := newFakeClock()
		n, err := Register(ctx, b, "127.0.0.1:9001", Options{Clock: clock, PeerAddress: "127.0.0.1:7001", Follower: "f1"})
		require.NoError(t, err)
		t.Cleanup(func() { n.Close(t.Context()) })
		require.Equal(t, "127.0.0.1:7001", n.PeerAddress())
		l, _, err := ReadLease(ctx, b, n.ID())
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1:7001", l.Peer, "the registered lease")
		for hb := uint64(1); hb <= 2; hb++ {
			clock.Step(n.opts.RenewEvery)
			waitHeartbeat(t, b, n, hb)
			l, _, err := ReadLease(ctx, b, n.ID())
			require.NoError(t, err)
			require.Equal(t, "127.0.0.1:7001", l.Peer, "the lease at heartbeat %d", l.Heartbeat)
		}
		r, err := n.Restart(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { r.Close(t.Context()) })
		l, _, err = ReadLease(ctx, b, r.ID())
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1:7001", l.Peer, "the restarted node's lease")

		// Without one, the lease has none.
		plain := register(t, b, "127.0.0.1:9002", newFakeClock())
		l, _, err = ReadLease(ctx, b, plain.ID())
		require.NoError(t, err)
		require.Empty(t, l.Peer)
		require.Empty(t, plain.PeerAddress())
	})
}

func TestRegisterRefusesBadPeerAddress(t *testing.T) {
	b := buckettest.Dir(t)
	for _, peer := range []string{"nohost", "h:", ":", "127.0.0.1"} {
		_, err := Register(t.Context(), b, "127.0.0.1:9001", Options{Clock: newFakeClock(), Lease: time.Second, PeerAddress: peer, Follower: "f1"})
		require.ErrorIs(t, err, ErrBadLease, "peer address %q", peer)
	}
	require.Empty(t, buckettest.Keys(t, b, frames.NodesPrefix), "leases written by refused registrations")
}
