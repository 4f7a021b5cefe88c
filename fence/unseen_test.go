package fence

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// renewFor keeps n's lease valid while its clock moves d forward, in
// renewal-sized steps.
func renewFor(t *testing.T, b bucket.Bucket, n *Node, c *fakeClock, d time.Duration) {
	t.Helper()
	for ; d > 0; d -= n.opts.RenewEvery {
		n.mu.Lock()
		hb := n.heartbeat
		n.mu.Unlock()
		c.Step(min(d, n.opts.RenewEvery))
		if d >= n.opts.RenewEvery {
			waitHeartbeat(t, b, n, hb+1)
		}
	}
}

// A holder whose lease vanished (an operator, a sweep) still takes itself
// for valid until its next renewal, so a claimant waits Lease+Grace from
// its own first sight of the absence before it takes the actor; a lease
// that reappears starts the wait over.
func TestClaimWaitsOutAMissingLease(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		ca, cb := newFakeClock(), newFakeClock()
		holder := register(t, b, "127.0.0.1:9001", ca)
		claimant := register(t, b, "127.0.0.1:9002", cb)
		_, err := holder.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)
		leaseKey := frames.NodeKey(holder.ID())
		data, _, err := bucket.ReadAll(ctx, b, leaseKey, MaxRecordBytes)
		require.NoError(t, err)
		require.NoError(t, b.Delete(ctx, leaseKey))
		require.NoError(t, holder.Valid(), "the holder should still take itself for valid")
		notYet := func(when string) {
			t.Helper()
			_, err := claimant.Claim(ctx, testActor, ClaimOptions{})
			if !errors.Is(err, ErrHolderUnseen) || errors.Is(err, ErrHeld) {
				t.Fatalf("%s: got %v, want ErrHolderUnseen (and not ErrHeld)", when, err)
			}
			rec := readRecord(t, b)
			require.Equal(t, frames.Epoch(1), rec.Epoch, "%s: own.json changed to %+v", when, rec)
			require.Equal(t, holder.ID(), rec.Node, "%s: own.json changed to %+v", when, rec)
		}
		notYet("at once")
		renewFor(t, b, claimant, cb, 10*time.Second)
		notYet("after 10 s")

		// The lease comes back (restored by hand): the holder is judged
		// alive again, and a second absence is waited out from scratch.
		_, err = b.Put(ctx, leaseKey, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
		require.NoError(t, err)
		_, err = claimant.Claim(ctx, testActor, ClaimOptions{})
		require.ErrorIs(t, err, ErrHeld, "holder with its lease back")
		require.NoError(t, b.Delete(ctx, leaseKey))
		notYet("absent again")
		renewFor(t, b, claimant, cb, 10*time.Second)
		notYet("10 s into the second absence")
		renewFor(t, b, claimant, cb, 5*time.Second)
		o, err := claimant.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "after lease+grace without a lease: %+v", o)
		require.Equal(t, frames.Epoch(2), o.Epoch, "after lease+grace without a lease: %+v", o)
		// Meanwhile the holder's next renewal finds no lease: it stops.
		ca.Step(holder.opts.RenewEvery)
		select {
		case <-holder.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a holder without a lease still considers itself live")
		}
		require.ErrorIs(t, holder.Valid(), ErrLeaseLost, "holder")
	})
}

// An observer forgets nodes it has stopped judging, absent ones included,
// so that judging nodes that come and go does not grow it without bound.
func TestObserverForgetsNodesItNoLongerJudges(t *testing.T) {
	b := buckettest.Dir(t)
	c := newFakeClock()
	o := NewObserver(b, Options{Clock: c})
	ctx := t.Context()
	for _, id := range []string{"n1", "n2", "n3"} {
		live, _, err := o.Judge(ctx, id)
		require.NoError(t, err, "%s", id)
		require.Equal(t, Unseen, live, "%s", id)
	}
	window := o.opts.Lease + o.opts.Grace
	c.Advance(window)
	live, _, err := o.Judge(ctx, "n1")
	require.NoError(t, err, "n1 after lease+grace")
	require.Equal(t, Gone, live, "n1 after lease+grace")
	c.Advance(forgetAfter*window - window)
	o.Judge(ctx, "n1") // n1 is still judged: remembered
	o.mu.Lock()
	_, kept1 := o.seen["n1"]
	_, kept2 := o.seen["n2"]
	n := len(o.seen)
	o.mu.Unlock()
	if !kept1 || kept2 || n != 1 {
		t.Fatalf("after %v: n1 kept %v, n2 kept %v, %d sightings", forgetAfter*window, kept1, kept2, n)
	}
	live, _, _ = o.Judge(ctx, "n1")
	require.Equal(t, Gone, live, "n1 forgotten while judged")
}
