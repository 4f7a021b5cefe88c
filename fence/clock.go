package fence

import "time"

// Clock is the time source of leases and liveness judgements. Only
// differences between readings of one method matter; Now and BootTime are
// never compared with each other, nor with another machine's clock. Tests
// inject a clock they advance by hand, and can suspend it: BootTime jumps
// while Now stands still.
type Clock interface {
	// Now is time.Now. Its monotonic reading ignores wall-clock steps, but
	// on Linux it stops while the machine or VM is suspended. Peers are
	// judged with it (Observer): suspension of the observer only makes it
	// wait longer before it fences anyone, which is safe.
	Now() time.Time
	// BootTime is the time elapsed since a fixed point (boot), counting
	// time spent suspended: CLOCK_BOOTTIME on Linux. A node judges its own
	// lease with it, so a node resumed after its lease ran out knows it
	// at once instead of acknowledging into a session a peer has taken.
	BootTime() time.Duration
	// After is time.After on this clock (Go's timers follow Now's
	// monotonic clock: one pending across a suspension fires late).
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock. On systems other than Linux, BootTime is
// the monotonic clock of time.Now, which may stop while the machine sleeps
// (see clock_other.go).
type SystemClock struct{}

func (SystemClock) Now() time.Time                         { return time.Now() }
func (SystemClock) BootTime() time.Duration                { return bootTime() }
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// processStart anchors monotonicTime.
var processStart = time.Now()

// monotonicTime is time.Now's monotonic clock as a BootTime reading: the
// fallback where no clock counting suspended time is available.
func monotonicTime() time.Duration { return time.Since(processStart) }
