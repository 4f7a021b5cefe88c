package fence

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootTime reads CLOCK_BOOTTIME: CLOCK_MONOTONIC (what Go's monotonic
// time reads) plus the time the system spent suspended. It has existed
// since Linux 2.6.39; should the call ever fail, the monotonic clock is
// the fallback, as on other systems.
func bootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return monotonicTime()
	}
	return time.Duration(ts.Nano())
}
