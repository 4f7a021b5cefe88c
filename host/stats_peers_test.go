package host

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
)

// peerHosts starts n hosts in peer mode on b, sharing a new cluster key,
// each with its follower transport on 127.0.0.1; the last full of them get
// a follower store that holds nothing (every write to it fails as full).
func peerHosts(t *testing.T, b bucket.Bucket, n, full int) []*Host {
	t.Helper()
	key := clusterKey(t)
	hs := make([]*Host, n)
	for i := range hs {
		pc := &PeersConfig{Listen: "127.0.0.1:0", Key: key}
		if i >= n-full {
			pc.MaxStoreBytes = 1
		}
		hs[i] = newHost(t, b, Config{Address: fmt.Sprintf("127.0.0.1:%d", i+1), Hooks: (&notesHooks{}).hooks(), Peers: pc})
	}
	return hs
}

func clusterKey(t *testing.T) []byte {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

// Stats' peer-mode section, on the owner of an actor whose three
// followers are nodes of the cluster, one or two of which cannot store
// anything: those are counted failed, the others' lag falls to 0 once
// they hold every commit, the acknowledgements are the followers' while
// two can give them and the bucket's once only one can (the session is
// below its quorum), and the counts outlive the database's close.
func TestStatsPeers(t *testing.T) {
	assert.Nil(t, newHost(t, buckettest.Dir(t), Config{}).Stats().Peers, "a host without Config.Peers")
	for _, full := range []int{1, 2} {
		t.Run(fmt.Sprintf("full=%d", full), func(t *testing.T) {
			ctx := t.Context()
			hs := peerHosts(t, buckettest.Dir(t), 4, full)
			a, err := hs[0].Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			defer a.Release()
			const writes = 5
			for i := range writes {
				require.NoError(t, addNote(ctx, a.Actor, fmt.Sprintf("note %d", i)))
				require.NoError(t, a.DB().Durable(ctx))
			}
			var p *PeerStats
			if !waitFor(func() bool {
				p = hs[0].Stats().Peers
				return p.Failed == full && p.LagSum == 0
			}) {
				t.Fatalf("the full followers never failed, or the others never caught up: %+v", p)
			}
			assert.Equal(t, 1, p.WithFollowers, "actors with followers")
			assert.Equal(t, 3, p.Followers, "followers in the set")
			assert.Zero(t, p.LagMax)
			assert.Equal(t, 1, p.Hub.Sessions)
			st := a.DB().Stats()
			assert.Equal(t, st.Entries, p.Entries, "entries handed to the followers")
			assert.Positive(t, p.Entries)
			if full == 1 {
				assert.Zero(t, p.BelowQuorum, "two followers can acknowledge")
				assert.Equal(t, int64(writes), p.AckedByFollowers, "each Durable answered by the followers")
				assert.Zero(t, p.AckedByBucket)
			} else {
				assert.Equal(t, 1, p.BelowQuorum, "one follower cannot make a quorum of two")
				assert.Equal(t, int64(writes), p.AckedByBucket, "each Durable answered by the bucket")
				assert.Zero(t, p.AckedByFollowers)
			}
			assert.Equal(t, st.AckedByPeers, p.AckedByFollowers)
			assert.Equal(t, st.AckedByBucket, p.AckedByBucket)
			assert.Positive(t, hs[1].Stats().Peers.StoreBytes, "a follower's store holds the actor's tail")
			last := hs[len(hs)-1].Stats().Peers
			assert.Zero(t, last.StoreBytes, "a full store holds nothing")
			assert.Positive(t, last.Hub.StoreErrors, "its writes failed")

			// Closed, the database's acknowledgements still count.
			a.DB().Fence()
			a.Release()
			if !waitFor(func() bool { p = hs[0].Stats().Peers; return hs[0].Stats().Open == 0 && p.WithFollowers == 0 }) {
				t.Fatalf("the fenced actor never closed: %+v", p)
			}
			assert.Equal(t, st.AckedByPeers, p.AckedByFollowers, "acknowledgements by followers, once closed")
			assert.Equal(t, st.AckedByBucket, p.AckedByBucket, "acknowledgements by the bucket, once closed")
			assert.Equal(t, st.Entries, p.Entries, "entries, once closed")
			assert.Zero(t, p.Followers+p.Failed+p.BelowQuorum)
		})
	}
}

// An actor reopened on the host's next node continues with the same
// session of its followers (framectl.DB.Reopen): Stats still reads its
// followers. The node is lost to an outage of its bucket longer than its
// lease, and a peer fences its lease meanwhile, so that the first Reopen
// claims at once (a claim that waited for the old lease would open anew,
// with a new session).
func TestStatsPeersAfterRecovery(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	out := buckettest.NewOutage(b)
	key := clusterKey(t)
	h := newHost(t, out, Config{Address: "127.0.0.1:1", Lease: recoveryLease, Grace: recoveryGrace, Hooks: (&notesHooks{}).hooks(),
		Peers: &PeersConfig{Listen: "127.0.0.1:0", Key: key}})
	var peers []*Host
	for i := range 3 {
		peers = append(peers, newHost(t, b, Config{Address: fmt.Sprintf("127.0.0.1:%d", i+2), Hooks: (&notesHooks{}).hooks(),
			Peers: &PeersConfig{Listen: "127.0.0.1:0", Key: key}}))
	}
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	require.NoError(t, addNote(ctx, a.Actor, "before"))
	require.NoError(t, a.DB().Durable(ctx))
	epoch := a.Epoch()
	a.Release()
	require.Equal(t, 3, h.Stats().Peers.Followers, "followers before the outage")

	lost := loseNode(t, h, out)
	if !waitFor(func() bool {
		live, err := peers[0].Node().Observer.Fence(ctx, lost.ID())
		return err == nil && live == fence.Fenced
	}) {
		t.Fatal("a peer never fenced the lost node's lease")
	}
	out.SetDown(false)
	var st Stats
	if !waitFor(func() bool { st = h.Stats(); return st.Open == 1 && st.ActorsFenced == 1 }) {
		t.Fatalf("the actor was never reopened on the next node: %+v", st)
	}
	require.Equal(t, Claims{OK: 2}, st.Claims, "the first open, then the Reopen, which claimed at once")
	a, err = h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	require.Greater(t, a.Epoch(), epoch, "reopened with the next epoch")
	require.NoError(t, addNote(ctx, a.Actor, "after"))
	require.NoError(t, a.DB().Durable(ctx))
	p := h.Stats().Peers
	assert.Equal(t, 1, p.WithFollowers, "actors with followers after the reopen")
	assert.Equal(t, 3, p.Followers, "followers after the reopen")
}
