package fence_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// Two nodes share a bucket: the first claim wins, the second learns where
// to forward, and a release hands the actor over with the next epoch.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fence-example-")
	defer os.RemoveAll(dir)
	b, _ := bucket.Open(ctx, "file://"+dir)

	a, _ := fence.Register(ctx, b, "10.0.0.1:8080", fence.Options{})
	defer a.Close(ctx)
	c, _ := fence.Register(ctx, b, "10.0.0.2:8080", fence.Options{})
	defer c.Close(ctx)

	actor := frames.Actor{Namespace: frames.NamespaceID("", "chat"), Actor: frames.ActorKey([]byte("room-1"))}
	own, err := a.Claim(ctx, actor, fence.ClaimOptions{})
	fmt.Println("a claims:", own.Epoch, err)

	_, err = c.Claim(ctx, actor, fence.ClaimOptions{})
	var held *fence.HeldError
	if errors.As(err, &held) {
		fmt.Println("c forwards to", held.Address)
	}

	a.Release(ctx, own, 0)
	own, err = c.Claim(ctx, actor, fence.ClaimOptions{})
	fmt.Println("c claims:", own.Epoch, err)
	// Output:
	// a claims: 1 <nil>
	// c forwards to 10.0.0.1:8080
	// c claims: 2 <nil>
}
