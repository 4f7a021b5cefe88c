package fence

import (
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

func TestSweepLeases(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		live := register(t, b, "127.0.0.1:9001", newFakeClock())
		dead := register(t, b, "127.0.0.1:9002", newFakeClock())
		// Nothing is old yet.
		if got, err := SweepLeases(ctx, b, time.Hour, time.Now()); err != nil || len(got) != 0 {
			t.Fatalf("fresh leases swept: %v %v", got, err)
		}
		// Two hours later by the bucket's clock, both are old: both go.
		got, err := SweepLeases(ctx, b, time.Hour, time.Now().Add(2*time.Hour))
		if err != nil || len(got) != 2 {
			t.Fatalf("swept %v, %v", got, err)
		}
		for _, n := range []*Node{live, dead} {
			if _, err := b.Stat(ctx, frames.NodeKey(n.ID())); err == nil {
				t.Fatalf("lease of %s still there", n.ID())
			}
		}
		// A node whose lease was swept cannot renew: it stops, it never
		// becomes a second owner.
		c := live.opts.Clock.(*fakeClock)
		for range 4 {
			c.Step(live.opts.RenewEvery)
		}
		select {
		case <-live.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a node without a lease still considers itself live")
		}
		if _, err := SweepLeases(ctx, b, 0, time.Now()); err == nil {
			t.Fatal("a zero age was accepted")
		}
	})
}
