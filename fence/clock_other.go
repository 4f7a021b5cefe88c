//go:build !linux

package fence

import "time"

// bootTime is the monotonic clock here: whether it counts time the
// machine spent asleep depends on the system, so on these systems a node
// resumed from sleep may still count its lease as valid until its next
// renewal fails.
func bootTime() time.Duration { return monotonicTime() }
