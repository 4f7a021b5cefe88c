package quorum_test

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/peer"
	"github.com/framectl/framectl/quorum"
)

// A holder of the cluster key who is no owner sends an actor's followers
// fences and resets for epochs nobody claimed, up to 2^64-1: none is
// promised (each is refused as unproven, and the follower's promise stays
// where it was), the owner goes on being acknowledged by its followers,
// and a takeover after it recovers what they acknowledged. Without the
// check (quorum/admit.go) the fence for 2^64-1 would make every follower
// refuse every epoch an owner can ever have.
func TestRogueFenceBricksNothing(t *testing.T) {
	b, ns := fourNodes(t)
	ctx := t.Context()
	db := openActor(t, ns[0], b, t.TempDir())
	c := writeRows(t, db, 5)
	rec, _, err := fence.ReadRecord(ctx, b, testActor)
	require.NoError(t, err)
	name := quorum.ActorName(testActor)
	other := frames.Actor{Namespace: testActor.Namespace, Actor: frames.ActorKey([]byte("another"))}

	refused := make(chan *follow.Refuse, 64)
	// The rogue holds the cluster's key, as every node does.
	rogue, err := peer.NewNode(peer.Config{ID: "rogue", Key: ns[0].key, Handler: func(_ follow.FollowerID, _ string, m follow.Message) {
		if r, ok := m.(*follow.Refuse); ok {
			refused <- r
		}
	}})
	require.NoError(t, err)
	defer rogue.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go rogue.Serve(ctx, ln)

	rogues := []follow.Message{
		&follow.Fence{Epoch: math.MaxUint64, Actor: testActor.String()},
		&follow.Append{Epoch: math.MaxUint64 - 1, Reset: true, Actor: testActor.String()},
		&follow.Fence{Epoch: rec.Epoch + 1},                            // names no actor
		&follow.Fence{Epoch: rec.Epoch + 1, Actor: other.String()},     // another actor's
		&follow.Fence{Epoch: rec.Epoch + 1, Actor: "not an actor/xyz"}, // not a name
	}
	var followers []*node
	for _, n := range ns[1:] {
		for _, f := range rec.Followers {
			if string(n.id()) == f {
				followers = append(followers, n)
			}
		}
	}
	require.Len(t, followers, len(rec.Followers))
	for _, f := range followers {
		require.NoError(t, rogue.SetAddr(f.id(), f.fn.PeerAddress()))
		for _, m := range rogues {
			require.NoError(t, rogue.Send(f.id(), name, m))
		}
	}
	want := len(followers) * len(rogues)
	deadline := time.After(10 * time.Second)
	for got := 0; got < want; {
		select {
		case r := <-refused:
			require.Equal(t, follow.RefuseUnproven, r.Reason, "refusal %+v", r)
			require.Equal(t, rec.Epoch, r.Newest, "the promise stays at the owner's epoch")
			got++
		case <-deadline:
			t.Fatalf("%d refusals of %d after 10 s", got, want)
		}
	}
	for _, f := range followers {
		require.Equal(t, int64(len(rogues)), f.hub.Stats().Unproven, "follower %s", f.id())
		st, err := f.store.Load(name)
		require.NoError(t, err)
		require.Equal(t, rec.Epoch, st.Promised, "follower %s promised past the owner", f.id())
	}

	// The owner is still acknowledged by its followers.
	before := db.Stats().AckedByPeers
	for i := 5; i < 10; i++ {
		insert(t, db, c, i)
	}
	require.Equal(t, before+5, db.Stats().AckedByPeers, "acknowledged by the followers after the rogue's fences")
	require.Zero(t, db.Stats().AckedByBucket)

	// And a takeover recovers it all.
	ns[0].kill()
	next := recordedFollower(t, b, ns[1:])
	db2 := openActor(t, next, b, t.TempDir())
	c2, err := db2.Conn()
	require.NoError(t, err)
	require.Equal(t, seq(10), rows(t, c2))
	require.NoError(t, c2.Close())
	require.NoError(t, db2.Close(context.Background()))
	require.Equal(t, int64(1), next.hub.Stats().TailsRecovered)
	_ = c.Close()
}
