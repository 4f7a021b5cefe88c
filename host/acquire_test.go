package host

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// Many goroutines acquire one actor nobody holds, all at once: it is opened
// once (one claim, one session, one Hooks.Opened), and every Handle shares
// that one Actor.
func TestAcquireSingleFlight(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			hooks := &notesHooks{}
			h := newHost(t, b, Config{Hooks: hooks.hooks()})
			const n = 32
			start := make(chan struct{})
			handles := make([]*Handle, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					handles[i], errs[i] = h.Acquire(ctx, "ns", []byte("one"))
				})
			}
			close(start)
			wg.Wait()
			for i := range n {
				require.NoError(t, errs[i], "Acquire %d", i)
				assert.Same(t, handles[0].Actor, handles[i].Actor, "Acquire %d got another Actor", i)
			}
			assert.Equal(t, int64(1), hooks.opened.Load(), "opens")
			assert.Equal(t, frames.Epoch(1), handles[0].Epoch())
			info := h.Actors()
			require.Len(t, info, 1)
			assert.Equal(t, n, info[0].Handles)
			for _, hd := range handles {
				hd.Release()
				hd.Release() // only the first counts
			}
			assert.Equal(t, 0, h.Actors()[0].Handles)
			inv, err := restore.Take(ctx, b, actorOf("ns", "one"))
			require.NoError(t, err)
			assert.Len(t, inv.Sessions, 1, "sessions in the bucket")
		})
	}
}

// With MaxOpens 2, six actors acquired at once open two at a time: while
// two are inside Hooks.Opened, the other four wait for a slot, and no
// third open ever starts before one ends.
func TestAcquireBoundsConcurrentOpens(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	const bound, actors = 2, 6
	var inflight, highest atomic.Int64
	release := make(chan struct{})
	hooks := &notesHooks{onOpened: func(ctx context.Context, a *Actor) error {
		now := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := highest.Load()
			if now <= m || highest.CompareAndSwap(m, now) {
				break
			}
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	h := newHost(t, b, Config{MaxOpens: bound, Hooks: hooks.hooks()})
	var wg sync.WaitGroup
	errs := make(chan error, actors)
	for i := range actors {
		wg.Go(func() {
			a, err := h.Acquire(ctx, "ns", fmt.Appendf(nil, "a%d", i))
			if err == nil {
				a.Release()
			}
			errs <- err
		})
	}
	queued := func() int {
		n := 0
		for _, a := range h.Actors() {
			if a.State == Queued {
				n++
			}
		}
		return n
	}
	for left := actors; left > 0; left-- {
		want := min(bound, left)
		if !waitFor(func() bool { return inflight.Load() == int64(want) && queued() == left-want }) {
			t.Fatalf("with %d opens left: %d in Hooks.Opened, %d queued; want %d and %d (highest %d)",
				left, inflight.Load(), queued(), want, left-want, highest.Load())
		}
		release <- struct{}{}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int64(bound), highest.Load(), "most opens at once")
	assert.Equal(t, int64(actors), hooks.opened.Load())
}

// An actor directory locked by someone else is not opened: flock locks
// belong to the open file, so a second lock conflicts in one process too.
func TestLockDirRefusesSecondLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	require.NoError(t, err)
	_, err = lockDir(dir)
	require.ErrorIs(t, err, ErrLocked)
	unlock()
	unlock2, err := lockDir(dir)
	require.NoError(t, err, "after unlock")
	unlock2()
}
