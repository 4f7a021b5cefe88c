package follow_test

import (
	"fmt"
	"time"

	"github.com/framectl/framectl/follow"
)

// An owner of epoch 1 and three followers with q=2, wired in memory: the
// takeover fences and recovers (nothing yet), the owner appends a commit,
// and it is acknowledged once two followers hold it.
func Example() {
	now := time.Unix(0, 0)
	set := []follow.FollowerID{"a", "b", "c"}
	followers := map[follow.FollowerID]*follow.Follower{}
	for _, id := range set {
		followers[id] = follow.NewFollower(follow.Limits{})
	}
	// deliver sends everything queued, and the replies back, until quiet;
	// down followers get nothing.
	deliver := func(n interface {
		Outbox() []follow.Envelope
		Receive(follow.FollowerID, follow.Message)
	}, down follow.FollowerID) {
		for out := n.Outbox(); len(out) > 0; out = n.Outbox() {
			for _, env := range out {
				if env.To == down {
					continue
				}
				// The follower's store fsyncs its State here, before
				// the reply goes.
				n.Receive(env.To, followers[env.To].Handle(env.Msg))
			}
		}
	}

	t, err := follow.NewTakeover(follow.TakeoverConfig{Epoch: 1, Quorum: 2, Followers: set}, now)
	if err != nil {
		panic(err)
	}
	deliver(t, "")
	recovery, err, done := t.Done()
	fmt.Println("takeover done:", done, err, "tail:", len(recovery.Tail))

	owner, err := follow.NewOwner(recovery, follow.OwnerConfig{}, now)
	if err != nil {
		panic(err)
	}
	head := owner.Head()
	if err := owner.Append(follow.Entry{Seq: head.Seq + 1, Before: head.Chain, After: 0x1234, Body: []byte("commit 1")}); err != nil {
		panic(err)
	}
	deliver(owner, "c") // c is down: a and b are the quorum
	fmt.Println("acknowledged through", owner.Acked())
	// Output:
	// takeover done: true <nil> tail: 0
	// acknowledged through 1
}
