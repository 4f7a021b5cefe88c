package fence

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// TestSweepPastAPage: own.json records listed only after more than a
// page (at the bucket's default page size) of other objects still
// protect their holders' leases, and a claim of an actor with more than
// a page of batches finds its newest session.
func TestSweepPastAPage(t *testing.T) {
	const objects = 1100
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		holder1 := register(t, b, "127.0.0.1:9001", newFakeClock())
		holder2 := register(t, b, "127.0.0.1:9002", newFakeClock())
		idle := register(t, b, "127.0.0.1:9003", newFakeClock())
		// Actor 1's batches sort before its own.json; actor 2's snapshots
		// (it has no own.json) before actor 3's own.json.
		objs := map[string][]byte{}
		for f := frames.Seq(1); f <= objects; f++ {
			objs[sweepActor(1).LogKey(3, f)] = []byte("x")
			objs[sweepActor(2).SnapshotKey(1, f)] = []byte("x")
		}
		putAll(t, b, objs)
		o, err := holder1.Claim(ctx, sweepActor(1), ClaimOptions{})
		require.NoError(t, err)
		require.Equal(t, frames.Epoch(4), o.Epoch, "claim after a session of %d batches", objects)
		_, err = holder2.Claim(ctx, sweepActor(3), ClaimOptions{})
		require.NoError(t, err)

		got, err := holders(ctx, b, 0)
		require.NoError(t, err)
		require.Equal(t, map[string]bool{holder1.ID(): true, holder2.ID(): true}, got, "holders")
		swept, err := SweepLeases(ctx, b, time.Hour, time.Now().Add(2*time.Hour))
		require.NoError(t, err)
		require.Equal(t, []string{frames.NodeKey(idle.ID())}, swept, "swept")
	})
}

// putAll puts each object of objs (by key), sixteen at a time.
func putAll(t *testing.T, b bucket.Bucket, objs map[string][]byte) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for k := range work {
				if _, err := b.Put(t.Context(), k, bytes.NewReader(objs[k]), int64(len(objs[k])), bucket.Condition{}); err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	for k := range objs {
		work <- k
	}
	close(work)
	wg.Wait()
	require.Empty(t, failed, "puts")
}
