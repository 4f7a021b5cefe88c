package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock tests advance by hand. Advance moves both of its
// readings; Suspend moves only BootTime, as a machine's suspension does
// (Go's monotonic clock and its timers stand still meanwhile).
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	boot    time.Duration
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) BootTime() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boot
}

// Suspend jumps BootTime by d while Now and the timers stand still.
func (c *fakeClock) Suspend(d time.Duration) {
	c.mu.Lock()
	c.boot += d
	c.mu.Unlock()
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

// Step waits until something waits on the clock (the renewal loop), then
// advances it: advancing before the loop asked for its next timer would
// skip that timer.
func (c *fakeClock) Step(d time.Duration) {
	c.awaitTimer()
	c.Advance(d)
}

// awaitTimer waits (up to 5 s) until something waits on the clock.
func (c *fakeClock) awaitTimer() {
	for range 5000 {
		c.mu.Lock()
		n := len(c.waiters)
		c.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.boot += d
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
	c.mu.Unlock()
}

var testActor = frames.Actor{Namespace: frames.NamespaceID("", "fence-test"), Actor: "a1"}

func register(t *testing.T, b bucket.Bucket, addr string, clock Clock) *Node {
	t.Helper()
	n, err := Register(t.Context(), b, addr, Options{Clock: clock, Lease: 10 * time.Second, Grace: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// waitHeartbeat waits until the node's lease shows heartbeat hb.
func waitHeartbeat(t *testing.T, b bucket.Bucket, n *Node, hb uint64) {
	t.Helper()
	for range 2000 {
		l, _, err := ReadLease(t.Context(), b, n.ID())
		if err == nil && l.Heartbeat >= hb {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("node %s never reached heartbeat %d", n.ID(), hb)
}

func backends(t *testing.T, f func(t *testing.T, b bucket.Bucket)) {
	t.Run("dir", func(t *testing.T) { f(t, buckettest.Dir(t)) })
	t.Run("s3", func(t *testing.T) { f(t, buckettest.S3(t)) })
}

func TestLeaseRenewsAndExpires(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		clock := newFakeClock()
		n := register(t, b, "127.0.0.1:9001", clock)
		require.NoError(t, n.Valid())
		for i := uint64(1); i <= 3; i++ {
			clock.Step(n.opts.RenewEvery)
			waitHeartbeat(t, b, n, i)
		}
		require.NoError(t, n.Valid(), "renewing node not valid")
		// Renewals that fail for a whole lease make the node invalid, for
		// good.
		n.b = buckettest.NewFaulty(b, buckettest.FaultConfig{ErrorRate: 1})
		for range 4 {
			clock.Step(n.opts.RenewEvery)
		}
		require.ErrorIs(t, n.Valid(), ErrLeaseLost)
		n.b = b
		clock.Advance(n.opts.RenewEvery)
		require.ErrorIs(t, n.Valid(), ErrLeaseLost, "a lost lease came back")
		select {
		case <-n.Done():
		default:
			t.Fatal("Done not closed")
		}
	})
}

func TestObserverFencesOnlyExpiredNodes(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		victimClock, peerClock := newFakeClock(), newFakeClock()
		victim := register(t, b, "127.0.0.1:9001", victimClock)
		peer := register(t, b, "127.0.0.1:9002", peerClock)
		ctx := t.Context()
		if live, _, err := peer.Observer.Judge(ctx, victim.ID()); err != nil || live != Alive {
			t.Fatalf("first sight: %v %v", live, err)
		}
		// The victim renews: however long the peer waits, it stays alive.
		for i := uint64(1); i <= 4; i++ {
			victimClock.Step(victim.opts.RenewEvery)
			waitHeartbeat(t, b, victim, i)
			peerClock.Advance(6 * time.Second)
			if live, err := peer.Observer.Fence(ctx, victim.ID()); err != nil || live != Alive {
				t.Fatalf("renewing node judged %v (%v)", live, err)
			}
		}
		// The victim stops (no renewals). Just under lease+grace on the
		// peer's clock it is still alive; at lease+grace it is fenced.
		peerClock.Advance(14 * time.Second)
		if live, _ := peer.Observer.Fence(ctx, victim.ID()); live != Alive {
			t.Fatalf("fenced %v early", live)
		}
		peerClock.Advance(1 * time.Second)
		require.Zero(t, peer.Observer.Fences(), "fences before the lease expired")
		live, err := peer.Observer.Fence(ctx, victim.ID())
		require.NoError(t, err, "expired node")
		require.Equal(t, Fenced, live, "expired node")
		if live, _, err := peer.Observer.Judge(ctx, victim.ID()); err != nil || live != Fenced {
			t.Fatalf("fenced node judged %v (%v)", live, err)
		}
		// Fencing it again finds it fenced and writes nothing: one fence.
		if live, err := peer.Observer.Fence(ctx, victim.ID()); err != nil || live != Fenced {
			t.Fatalf("fencing a fenced node: %v (%v)", live, err)
		}
		require.Equal(t, int64(1), peer.Observer.Fences(), "fences")
		// The observer keeps nothing for a fenced node (a host judging
		// thousands of dead nodes over its life must not grow).
		peer.Observer.mu.Lock()
		_, kept := peer.Observer.seen[victim.ID()]
		peer.Observer.mu.Unlock()
		if kept {
			t.Error("observer still remembers the fenced node")
		}
		// The victim learns it at its next renewal and stops for good.
		victimClock.Step(victim.opts.RenewEvery)
		select {
		case <-victim.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("fenced node did not notice")
		}
		require.ErrorIs(t, victim.Valid(), ErrFenced)
	})
}

func TestClaimReleaseTakeover(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		ca, cb := newFakeClock(), newFakeClock()
		a := register(t, b, "127.0.0.1:9001", ca)
		bn := register(t, b, "127.0.0.1:9002", cb)
		oa, err := a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "first claim: %+v", oa)
		require.Equal(t, frames.Epoch(1), oa.Epoch, "first claim: %+v", oa)
		// A claims again: every claim opens a new session.
		again, err := a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "repeat claim: %+v", again)
		require.Equal(t, frames.Epoch(2), again.Epoch, "repeat claim: %+v", again)
		oa = again
		// B is told who holds it.
		_, err = bn.Claim(ctx, testActor, ClaimOptions{})
		var held *HeldError
		require.ErrorAs(t, err, &held, "claim of a held actor")
		require.Equal(t, a.ID(), held.Node, "claim of a held actor")
		require.Equal(t, "127.0.0.1:9001", held.Address, "claim of a held actor")
		require.ErrorIs(t, err, ErrHeld, "claim of a held actor")
		// A releases; B claims epoch 2.
		require.NoError(t, a.Release(ctx, oa, 0))
		ob, err := bn.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "claim after release: %+v", ob)
		require.Equal(t, frames.Epoch(3), ob.Epoch, "claim after release: %+v", ob)
		// B dies (stops renewing); after lease+grace on A's clock, A fences
		// B and takes epoch 3.
		_, err = a.Claim(ctx, testActor, ClaimOptions{})
		require.ErrorIs(t, err, ErrHeld, "claim of a live holder")
		// A renews in the meantime so that its own lease stays valid.
		for i := uint64(1); i <= 5; i++ {
			ca.Step(a.opts.RenewEvery)
			waitHeartbeat(t, b, a, i)
		}
		oa3, err := a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "takeover: %+v", oa3)
		require.Equal(t, frames.Epoch(4), oa3.Epoch, "takeover: %+v", oa3)
		// B's release of its stale claim fails: it was fenced.
		require.ErrorIs(t, bn.Release(ctx, ob, 0), ErrFenced, "stale release")
		rec := readRecord(t, b)
		require.Equal(t, frames.Epoch(4), rec.Epoch, "own.json %+v", rec)
		require.Equal(t, a.ID(), rec.Node, "own.json %+v", rec)
	})
}

// A claim records the claimant's retention and returns the record it
// replaced; a release records where the session ended, keeping the
// retention.
func TestClaimRecordsRetentionReleaseRecordsEnd(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		a := register(t, b, "127.0.0.1:9001", newFakeClock())
		o, err := a.Claim(ctx, testActor, ClaimOptions{Retention: time.Hour})
		require.NoError(t, err, "first claim: %+v", o)
		require.Equal(t, Record{}, o.Prev, "first claim: %+v", o)
		rec := readRecord(t, b)
		require.Equal(t, time.Hour, rec.Retention, "own.json after the claim: %+v", rec)
		require.Equal(t, frames.Seq(0), rec.Seq, "own.json after the claim: %+v", rec)
		require.Equal(t, a.ID(), rec.Node, "own.json after the claim: %+v", rec)
		require.NoError(t, a.Release(ctx, o, 42))
		want := Record{Epoch: o.Epoch, Seq: 42, Retention: time.Hour}
		require.Equal(t, want, readRecord(t, b), "own.json after the release")
		o2, err := a.Claim(ctx, testActor, ClaimOptions{Retention: 2 * time.Hour})
		if err != nil || !o2.Prev.Equal(want) {
			t.Fatalf("second claim: %+v (prev %+v) %v, want prev %+v", o2, o2.Prev, err, want)
		}
		rec = readRecord(t, b)
		require.Equal(t, 2*time.Hour, rec.Retention, "own.json after the second claim: %+v", rec)
		require.Equal(t, frames.Seq(0), rec.Seq, "own.json after the second claim: %+v", rec)
		_, err = a.Claim(ctx, testActor, ClaimOptions{Retention: -time.Second})
		assert.Error(t, err, "claim with a negative retention succeeded")
	})
}

func readRecord(t *testing.T, b bucket.Bucket) Record {
	t.Helper()
	data, _, err := bucket.ReadAll(t.Context(), b, testActor.OwnKey(), MaxRecordBytes)
	require.NoError(t, err)
	r, err := ParseRecord(testActor.OwnKey(), data)
	require.NoError(t, err)
	return r
}

// A process restarting at the same address is a new node: it never takes
// its predecessor's record for its own, and waits for the predecessor's
// lease to expire like any other claimant.
func TestRestartedNodeIsNotItsPredecessor(t *testing.T) {
	b := buckettest.Dir(t)
	ctx := t.Context()
	old := register(t, b, "127.0.0.1:9001", newFakeClock())
	_, err := old.Claim(ctx, testActor, ClaimOptions{})
	require.NoError(t, err)
	clock := newFakeClock()
	restarted := register(t, b, "127.0.0.1:9001", clock)
	_, err = restarted.Claim(ctx, testActor, ClaimOptions{})
	require.ErrorIs(t, err, ErrHeld, "restarted node took its predecessor's record")
}

// Many nodes claim one actor at once, round after round: exactly one wins
// each epoch, and epochs only go up.
func TestClaimRace(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		const racers = 12
		nodes := make([]*Node, racers)
		for i := range nodes {
			nodes[i] = register(t, b, fmt.Sprintf("127.0.0.1:%d", 9100+i), newFakeClock())
		}
		var last frames.Epoch
		for round := range 5 {
			var wins atomic.Int32
			var winner atomic.Pointer[Ownership]
			var wg sync.WaitGroup
			for _, n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o, err := n.Claim(ctx, testActor, ClaimOptions{})
					switch {
					case err == nil:
						wins.Add(1)
						winner.Store(&o)
					case !errors.Is(err, ErrHeld):
						t.Errorf("round %d: %v", round, err)
					}
				}()
			}
			wg.Wait()
			o := winner.Load()
			if wins.Load() != 1 || o == nil || o.Epoch <= last {
				t.Fatalf("round %d: %d winners, epoch %v after %d", round, wins.Load(), o, last)
			}
			last = o.Epoch
			// The winner releases for the next round.
			for _, n := range nodes {
				if rec := readRecord(t, b); rec.Node == n.ID() {
					require.NoError(t, n.Release(ctx, *o, 0))
				}
			}
		}
	})
}

// Lost responses do not confuse a claim: a PUT that landed is recognised.
func TestClaimWithLostResponses(t *testing.T) {
	inner := buckettest.Dir(t)
	b := buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: 2, LostResponseRate: 0.5})
	ctx := t.Context()
	var n *Node
	var err error
	for range 20 { // registration itself may report a lost response
		if n, err = Register(ctx, b, "127.0.0.1:9001", Options{Clock: newFakeClock()}); err == nil {
			break
		}
	}
	require.NoError(t, err)
	defer n.Close(context.Background())
	for i := range 10 {
		o, err := n.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "claim %d", i)
		require.NoError(t, n.Release(ctx, o, 0), "release %d", i)
	}
	if rec := readRecord(t, inner); rec.Epoch != 10 || !rec.Released() {
		t.Fatalf("own.json after 10 claims: %+v", rec)
	}
}

func TestDamagedRecordIsNotAbsent(t *testing.T) {
	b := buckettest.Dir(t)
	n := register(t, b, "127.0.0.1:9001", newFakeClock())
	_, err := b.Put(t.Context(), testActor.OwnKey(), strings.NewReader("{oops"), 5, bucket.Condition{})
	require.NoError(t, err)
	_, err = n.Claim(t.Context(), testActor, ClaimOptions{})
	require.ErrorIs(t, err, ErrBadRecord)
}

func TestCloseDeregisters(t *testing.T) {
	b := buckettest.Dir(t)
	n := register(t, b, "127.0.0.1:9001", newFakeClock())
	require.NoError(t, n.Close(t.Context()))
	_, err := b.Stat(t.Context(), frames.NodeKey(n.ID()))
	require.ErrorIs(t, err, bucket.ErrNotFound, "lease still there")
	require.ErrorIs(t, n.Valid(), ErrClosed)
}
