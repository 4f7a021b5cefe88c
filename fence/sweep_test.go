package fence

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, err, "swept")
		require.Len(t, got, 2, "swept")
		for _, n := range []*Node{live, dead} {
			_, err := b.Stat(ctx, frames.NodeKey(n.ID()))
			require.Error(t, err, "lease of %s still there", n.ID())
		}
		// A node whose lease was swept cannot renew: it stops, it never
		// becomes a second owner.
		live.opts.Clock.(*fakeClock).Step(live.opts.RenewEvery)
		select {
		case <-live.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a node without a lease still considers itself live")
		}
		_, err = SweepLeases(ctx, b, 0, time.Now())
		require.Error(t, err, "a zero age was accepted")
	})
}

// sweepActor is the i-th actor of the sweep tests.
func sweepActor(i int) frames.Actor {
	return frames.Actor{Namespace: testActor.Namespace, Actor: frames.ActorKey([]byte{byte(i)})}
}

func putTiny(t *testing.T, b bucket.Bucket, key string) { t.Helper(); putBytes(t, b, key, []byte("x")) }

func putBytes(t *testing.T, b bucket.Bucket, key string, body []byte) {
	t.Helper()
	_, err := b.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), bucket.Condition{})
	require.NoError(t, err)
}

// The sweep never deletes the lease of a node an own.json names as holder,
// however old: claimants judge that lease. Released records name nobody.
func TestSweepKeepsHoldersLeases(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		holder1 := register(t, b, "127.0.0.1:9001", newFakeClock())
		holder2 := register(t, b, "127.0.0.1:9002", newFakeClock())
		released := register(t, b, "127.0.0.1:9003", newFakeClock())
		idle := register(t, b, "127.0.0.1:9004", newFakeClock())
		claim := func(n *Node, a frames.Actor) Ownership {
			t.Helper()
			o, err := n.Claim(ctx, a, ClaimOptions{})
			require.NoError(t, err)
			return o
		}
		// Actor 1: chunks, batches, own.json, snapshots (own.json sorts
		// between; chunks first).
		for i := range 3 {
			putTiny(t, b, sweepActor(1).ChunkKey(frames.SumChunk([]byte{byte(i)})))
		}
		for f := frames.Seq(1); f <= 5; f++ {
			putTiny(t, b, sweepActor(1).LogKey(1, f))
		}
		claim(holder1, sweepActor(1))
		for f := frames.Seq(1); f <= 3; f++ {
			putTiny(t, b, sweepActor(1).SnapshotKey(1, f))
		}
		// Actor 2 released, actor 3 has batches and no own.json, actor 4
		// held, with chunks and nothing else.
		require.NoError(t, released.Release(ctx, claim(released, sweepActor(2)), 0))
		for f := frames.Seq(1); f <= 4; f++ {
			putTiny(t, b, sweepActor(3).LogKey(2, f))
		}
		claim(holder2, sweepActor(4))
		putTiny(t, b, sweepActor(4).ChunkKey(frames.SumChunk(nil)))

		// Every own.json is found however the listing pages, and most
		// batches and snapshots are skipped, not listed.
		want := map[string]bool{holder1.ID(): true, holder2.ID(): true}
		var total int
		for _, err := range bucket.All(ctx, b, "do/") {
			require.NoError(t, err)
			total++
		}
		for _, size := range []int{1, 2, 3, 0} {
			cb := &countingList{Bucket: b}
			got, err := holders(ctx, cb, size)
			require.NoError(t, err, "page size %d: holders", size)
			require.Equal(t, want, got, "page size %d: holders", size)
			if size > 0 && cb.listed.Load() >= int64(total) {
				t.Errorf("page size %d: listed %d keys of %d", size, cb.listed.Load(), total)
			}
		}

		got, err := SweepLeases(ctx, b, time.Hour, time.Now().Add(2*time.Hour))
		wantSwept := []string{frames.NodeKey(released.ID()), frames.NodeKey(idle.ID())}
		slices.Sort(got)
		slices.Sort(wantSwept)
		require.NoError(t, err, "swept")
		require.Equal(t, wantSwept, got, "swept")
		for _, n := range []*Node{holder1, holder2} {
			_, err := b.Stat(ctx, frames.NodeKey(n.ID()))
			require.NoError(t, err, "the lease of holder %s", n.ID())
		}
	})
}

// A damaged own.json could name any node: the sweep deletes nothing and
// says which record is damaged.
func TestSweepStopsAtDamagedRecord(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		register(t, b, "127.0.0.1:9001", newFakeClock())
		bad := sweepActor(7).OwnKey()
		_, err := b.Put(ctx, bad, strings.NewReader(`{"epoch":1}`), 11, bucket.Condition{})
		require.NoError(t, err)
		got, err := SweepLeases(ctx, b, time.Hour, time.Now().Add(2*time.Hour))
		if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), bad) || len(got) != 0 {
			t.Fatalf("swept %v, %v; want nothing and ErrBadRecord naming %s", got, err, bad)
		}
		var leases int
		for _, err := range bucket.All(ctx, b, frames.NodesPrefix) {
			require.NoError(t, err)
			leases++
		}
		if leases != 1 {
			t.Fatalf("%d leases left, want 1", leases)
		}
	})
}

// countingList counts the keys a bucket's listings return.
type countingList struct {
	bucket.Bucket
	listed atomic.Int64
}

func (c *countingList) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	p, err := c.Bucket.List(ctx, prefix, startAfter, limit)
	c.listed.Add(int64(len(p.Objects)))
	return p, err
}
