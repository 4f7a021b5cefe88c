package fence

import "time"

// Clock is the time source of leases and liveness judgements. Only
// differences between its readings matter, and they must be monotonic:
// time.Now carries a monotonic reading, so the system clock is fine even
// when the wall clock steps. Tests inject a clock they advance by hand.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time                         { return time.Now() }
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
