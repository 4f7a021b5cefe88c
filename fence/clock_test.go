package fence

import (
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/require"
)

// A node whose machine was suspended past its lease is not valid when it
// resumes, although its monotonic clock says it renewed a moment ago: peers
// may have fenced it meanwhile. A shorter suspension costs nothing.
func TestSuspendedNodeLosesItsLease(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		clock := newFakeClock()
		n := register(t, b, "127.0.0.1:9001", clock)
		clock.Step(n.opts.RenewEvery)
		waitHeartbeat(t, b, n, 1)
		clock.awaitTimer() // the renewal loop sleeps: a suspension finds it there
		renewed := clock.Now()

		clock.Suspend(n.opts.Lease - n.opts.RenewEvery - time.Second)
		require.NoError(t, n.Valid(), "valid after a suspension shorter than the lease")
		clock.Suspend(n.opts.RenewEvery + time.Second)
		if !clock.Now().Equal(renewed) {
			t.Fatal("the monotonic clock moved during the suspension")
		}
		require.ErrorIs(t, n.Valid(), ErrLeaseLost, "resumed past its lease")

		// Left to itself, a resumed node's renewal loop wakes (its timer
		// fires late), finds the lease lost and stops without renewing.
		clock2 := newFakeClock()
		n2 := register(t, b, "127.0.0.1:9002", clock2)
		clock2.Step(n2.opts.RenewEvery)
		waitHeartbeat(t, b, n2, 1)
		clock2.awaitTimer()
		clock2.Suspend(n2.opts.Lease)
		clock2.Step(n2.opts.RenewEvery)
		select {
		case <-n2.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a node resumed past its lease is still live")
		}
		require.ErrorIs(t, n2.Err(), ErrLeaseLost, "stopped")
		l, _, err := ReadLease(t.Context(), b, n2.ID())
		if err != nil || l.Heartbeat != 1 {
			t.Fatalf("lease after the suspension: %+v %v (renewed after its lease ran out?)", l, err)
		}
	})
}

// SystemClock.BootTime runs at least as fast as time.Now's monotonic
// clock (on Linux it is CLOCK_MONOTONIC plus the time spent suspended).
func TestSystemClockBootTime(t *testing.T) {
	var c SystemClock
	b0 := c.BootTime()
	m0 := c.Now()
	time.Sleep(20 * time.Millisecond)
	elapsed := c.Now().Sub(m0)
	b1 := c.BootTime()
	if b0 <= 0 || b1-b0 < elapsed {
		t.Fatalf("BootTime %v then %v: %v apart, monotonic clock %v", b0, b1, b1-b0, elapsed)
	}
}
