// Package stopclock owns a fence.Clock for tests that stops: the real
// clock until Stop, then one that stands still and whose timers never
// fire, as on a machine whose clock does not count the time it was away
// (a VM restored from a snapshot, a hypervisor pause). A node on it
// believes its lease valid for ever and never renews again to learn
// otherwise: the zombie that only a proof read from storage can fence.
//
// It must never be used outside tests.
package stopclock

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/fence"
)

// Clock is a fence.Clock that runs until Stop. The zero value runs.
type Clock struct {
	stopped atomic.Bool
	mu      sync.Mutex
	now     time.Time
	boot    time.Duration
}

var _ fence.Clock = (*Clock)(nil)

// Stop makes the clock stand still from now on.
func (c *Clock) Stop() {
	c.mu.Lock()
	c.now, c.boot = time.Now(), fence.SystemClock{}.BootTime()
	c.mu.Unlock()
	c.stopped.Store(true)
}

// Now is time.Now until Stop, then the time Stop was called.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Load() {
		return c.now
	}
	return time.Now()
}

// BootTime is fence.SystemClock's until Stop, then its value at Stop.
func (c *Clock) BootTime() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Load() {
		return c.boot
	}
	return fence.SystemClock{}.BootTime()
}

// After is time.After until Stop; after it, a channel that never fires.
// (A timer started before Stop still fires: the node it wakes reads the
// stopped clock.)
func (c *Clock) After(d time.Duration) <-chan time.Time {
	if c.stopped.Load() {
		return nil
	}
	return time.After(d)
}
