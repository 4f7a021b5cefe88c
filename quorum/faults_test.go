package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/peer/peertest"
	"github.com/framectl/framectl/quorum"
)

// These run the owner's session and the followers' stores over the real
// transport (TCP on 127.0.0.1) through a fault-injecting network: every
// message may be lost, copied, held back or delayed, and pairs of nodes
// are cut apart. The entries are opaque to the protocol, so they are made
// up here (vfs's are a batch of one frame each).

// faultyRules are on for every test here.
var faultyRules = peertest.Rules{Drop: 0.1, Duplicate: 0.1, Reorder: 0.1, DelayMax: 2 * time.Millisecond}

// faultyCluster starts n nodes on one faulty network.
func faultyCluster(t *testing.T, n int) (bucket.Bucket, *peertest.Network, []*node) {
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	nw := peertest.New(uint64(time.Now().UnixNano()))
	t.Cleanup(nw.Close)
	require.NoError(t, nw.Set(faultyRules))
	key := clusterKey(t)
	var ns []*node
	for range n {
		ns = append(ns, startNodeWith(t, b, key, nodeOptions{net: nw}))
	}
	return b, nw, ns
}

// startOwner claims the actor on n and starts its session from the empty
// log, with n's hub choosing the followers.
func startOwner(t *testing.T, n *node) (*quorum.Session, fence.Ownership) {
	ctx := context.Background()
	own, err := n.fn.Claim(ctx, testActor, fence.ClaimOptions{})
	require.NoError(t, err)
	s := n.hub.Session(testActor)
	tail, err := s.Takeover(ctx, own.Prev, own.Epoch, follow.Point{})
	require.NoError(t, err)
	require.Empty(t, tail)
	own, err = s.Start(ctx, own, follow.Point{})
	require.NoError(t, err)
	require.Len(t, own.Followers, 3)
	t.Cleanup(func() { s.Close(own) })
	return s, own
}

// chain returns entries 1..n, chained from the empty log.
func chain(n int) []follow.Entry {
	var es []follow.Entry
	var c frames.Checksum
	for i := 1; i <= n; i++ {
		next := frames.Checksum(uint64(i)*0x9e3779b97f4a7c15 + 1)
		es = append(es, follow.Entry{Seq: frames.Seq(i), Before: c, After: next, Body: fmt.Appendf(nil, "commit %d", i)})
		c = next
	}
	return es
}

// appendAll hands es to the session.
func appendAll(t *testing.T, s *quorum.Session, es []follow.Entry) {
	t.Helper()
	for _, e := range es {
		require.NoError(t, s.Append(e))
	}
}

// awaitAcked waits until the session acknowledges seq.
func awaitAcked(t *testing.T, s *quorum.Session, seq frames.Seq) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		acked, ch, _ := s.Acked()
		if acked >= seq {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			require.FailNow(t, "not acknowledged", "seq %d, acknowledged %d: %+v", seq, acked, s.Stats())
		}
	}
}

func byID(ns []*node, id string) *node {
	i := slices.IndexFunc(ns, func(n *node) bool { return n.store.ID() == id })
	return ns[i]
}

// An owner cut off from its followers while a new owner takes over
// acknowledges nothing after the takeover: what it appended behind the cut
// reaches nobody, and once the cut heals the followers refuse it (a newer
// epoch fenced its own), so it learns it was superseded and acknowledges
// nothing more. The new owner's tail is everything the old one
// acknowledged, and nothing it did not.
func TestPartitionedOwnerAcknowledgesNothing(t *testing.T) {
	_, nw, ns := faultyCluster(t, 4)
	old, own := startOwner(t, ns[0])
	es := chain(30)
	appendAll(t, old, es[:10])
	awaitAcked(t, old, 10)

	for _, id := range own.Followers {
		nw.Partition(ns[0].id(), follow.FollowerID(id))
	}
	appendAll(t, old, es[10:15])

	// The new owner is one of the followers: its fence reaches its own
	// store in-process, the others' over the faulty network.
	next := byID(ns, own.Followers[0])
	s := next.hub.Session(testActor)
	// It claims own.json first, as any new owner does (the followers
	// check the claim before they promise: admit.go); the old owner is
	// alive, so the claim is one on suspicion.
	claim, err := next.fn.Claim(context.Background(), testActor, fence.ClaimOptions{
		Suspect: func(context.Context, fence.Record, fence.Lease) error { return nil }})
	require.NoError(t, err)
	require.Equal(t, own.Epoch+1, claim.Epoch)
	tail, err := s.Takeover(context.Background(), claim.Prev, claim.Epoch, follow.Point{})
	require.NoError(t, err)
	require.Equal(t, es[:10], tail, "the tail is what the old owner acknowledged, and no more")
	require.Equal(t, frames.Seq(10), old.Stats().Acked)

	nw.HealAll()
	deadline := time.Now().Add(20 * time.Second)
	i := 15
	for old.Err() == nil {
		require.True(t, time.Now().Before(deadline), "the old owner never heard it was fenced: %+v", old.Stats())
		if i < len(es) {
			if err := old.Append(es[i]); err != nil {
				require.ErrorIs(t, err, follow.ErrSuperseded)
			}
			i++
		}
		require.Equal(t, frames.Seq(10), old.Stats().Acked, "the old owner acknowledged past the takeover")
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, old.Err(), follow.ErrSuperseded)
	require.Equal(t, frames.Seq(10), old.Stats().Acked)
	_, _, quorumOK := old.Acked()
	require.False(t, quorumOK, "a superseded session offers no quorum")
	require.Positive(t, nw.Stats().Partitioned, "the cut lost messages")
	s.Close(fence.Ownership{})
}

// A follower cut off from the owner misses commits the other two
// acknowledge; once the cut heals it catches up, over the lossy network,
// to the owner's head.
func TestCutFollowerCatchesUp(t *testing.T) {
	_, nw, ns := faultyCluster(t, 4)
	s, own := startOwner(t, ns[0])
	es := chain(40)
	appendAll(t, s, es[:5])
	awaitAcked(t, s, 5)

	behind := byID(ns, own.Followers[2])
	nw.Partition(ns[0].id(), behind.id())
	appendAll(t, s, es[5:25])
	awaitAcked(t, s, 25) // by the other two
	st := s.Stats()
	i := slices.IndexFunc(st.Followers, func(f follow.FollowerStatus) bool { return f.ID == behind.id() })
	require.Less(t, st.Followers[i].Matched, frames.Seq(25), "the cut follower got nothing past the cut")

	nw.Heal(ns[0].id(), behind.id())
	appendAll(t, s, es[25:])
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := s.Stats()
		if st.Followers[i].Matched == 40 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the follower did not catch up: %+v", st)
		time.Sleep(20 * time.Millisecond)
	}
	held, err := behind.store.Load(quorum.ActorName(testActor))
	require.NoError(t, err)
	require.Equal(t, es[len(es)-1].Point(), held.End(), "its store holds the whole log")
	for _, f := range s.Stats().Followers {
		require.NoError(t, f.Failed)
	}
	// The owner counts the follower's acknowledgements as they reach it,
	// over the same lossy network: its Matched can lead Acked a moment.
	awaitAcked(t, s, 40)
	require.Equal(t, frames.Seq(40), s.Stats().Acked, "acknowledged past the log")
	stats := nw.Stats()
	require.Positive(t, stats.Dropped+stats.Duplicated+stats.Reordered, "the network injected faults: %+v", stats)
	require.False(t, errors.Is(s.Err(), follow.ErrSuperseded))
}
