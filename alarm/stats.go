package alarm

import (
	"sync/atomic"
	"time"
)

// Stats describes the alarms of a node's actors.
type Stats struct {
	// Pending counts the actors whose alarm this node will look at: held
	// actors with an alarm set, failed alarms waiting for their retry,
	// hibernated actors it will wake for theirs. (A look at an alarm
	// deleted meanwhile counts until its time.)
	Pending int
	// Runs counts the runs of alarm handlers the node saw to their end
	// (one cut short by the host's Close is not counted), Failures those
	// that failed (the handler's error, or the clear after it), Dropped
	// the alarms given up after their last retry failed.
	Runs, Failures, Dropped int64
	// FirstRuns counts the runs that were not retries; Lateness sums how
	// long after its time each one started, and Late counts those that
	// started more than a second (the threshold of the scans) after it.
	// A live holder runs an alarm at its time, so a late one was taken
	// over from a dead holder, or waited for an open or a busy host.
	FirstRuns, Late int64
	Lateness        time.Duration
}

// counters are the Service's counts since New, updated where the runs
// end; Stats reads them.
type counters struct {
	ok, failures, dropped     atomic.Int64
	firstRuns, late, lateness atomic.Int64
}

// ran counts a run of an alarm handler that started late after the
// alarm's time, the retry-th retry, and failed with err (nil: done).
func (c *counters) ran(retry int, late time.Duration, err error) {
	// Successes and failures apart, each only ever growing to a reader
	// of Stats (Runs is their sum).
	if err != nil {
		c.failures.Add(1)
	} else {
		c.ok.Add(1)
	}
	if retry > 0 {
		return
	}
	late = max(late, 0)
	c.firstRuns.Add(1)
	c.lateness.Add(int64(late))
	if late > slack {
		c.late.Add(1)
	}
}

// Stats describes the node's alarms now.
func (svc *Service) Stats() Stats {
	svc.mu.Lock()
	s := Stats{Pending: len(svc.sched.at)}
	svc.mu.Unlock()
	c := &svc.stats
	s.Failures, s.Dropped = c.failures.Load(), c.dropped.Load()
	s.Runs = c.ok.Load() + s.Failures
	s.FirstRuns, s.Late = c.firstRuns.Load(), c.late.Load()
	s.Lateness = time.Duration(c.lateness.Load())
	return s
}
