package peer_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/peer"
)

// Two nodes on 127.0.0.1 sharing a cluster key: the owner fences its
// follower for actor db-1, and the follower promises, for the same actor,
// over the owner's own connection (it has no address for the owner).
func Example() {
	key := make([]byte, peer.MinKeyBytes)
	rand.Read(key)
	ctx := context.Background()

	var follower *peer.Node
	follower, _ = peer.NewNode(peer.Config{ID: "f1", Key: key, Handler: func(from follow.FollowerID, actor string, m follow.Message) {
		fmt.Printf("f1 got %T of epoch %d for %s from %s\n", m, m.MsgEpoch(), actor, from)
		follower.Send(from, actor, &follow.Promise{Epoch: m.MsgEpoch()})
	}})
	defer follower.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go follower.Serve(ctx, ln)

	promised := make(chan follow.Message)
	owner, _ := peer.NewNode(peer.Config{ID: "owner", Key: key, Handler: func(from follow.FollowerID, actor string, m follow.Message) {
		fmt.Printf("owner got %T of epoch %d for %s from %s\n", m, m.MsgEpoch(), actor, from)
		promised <- m
	}})
	defer owner.Close()
	owner.SetAddr("f1", ln.Addr().String())
	if err := owner.Send("f1", "db-1", &follow.Fence{Epoch: 1}); err != nil {
		fmt.Println(err)
	}
	<-promised
	// Output:
	// f1 got *follow.Fence of epoch 1 for db-1 from owner
	// owner got *follow.Promise of epoch 1 for db-1 from f1
}
