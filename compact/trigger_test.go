package compact

import (
	"errors"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket/buckettest"
)

// unbounded is the size rule without its bounds: a pass whenever the log
// reaches the database's size.
var unbounded = Rule{MinLogBytes: -1, MinInterval: -1}

// TestTrigger: the Trigger asks for a pass when the rule is due, never for
// two at once, restarts its count from what the pass left plus what was
// uploaded meanwhile, and waits after a failure.
func TestTrigger(t *testing.T) {
	now := time.Now()
	tr := unbounded.Trigger(1000)
	tr.now = func() time.Time { return now }
	advance := func(d time.Duration) { now = now.Add(d) }
	step := func(n int64, want bool) {
		t.Helper()
		if got := tr.Uploaded(n); got != want {
			l, db, running := tr.Estimate()
			t.Fatalf("Uploaded(%d) = %v, want %v (log %d, database %d, running %v)", n, got, want, l, db, running)
		}
	}
	step(400, false)
	step(599, false)
	step(1, true) // 1000 >= 1000
	step(500, false)
	step(5000, false) // one pass at a time
	tr.Done(Result{Snapshot: "s", LeftLogBytes: 0, LeftDBBytes: 3000}, nil)
	if l, db, running := tr.Estimate(); l != 5500 || db != 3000 || running {
		t.Fatalf("after the pass: log %d, database %d, running %v; want 5500 (uploaded meanwhile), 3000, false", l, db, running)
	}
	step(1, true) // 5501 >= 3000: the uploads during the pass are due already
	tr.Done(Result{LeftLogBytes: 100, LeftDBBytes: 3000}, nil)
	step(2800, false)
	step(100, true)

	// A failure holds the next pass back for DefaultRetryDelay.
	tr.Done(Result{}, errors.New("bucket down"))
	step(1, false)
	advance(DefaultRetryDelay - time.Second)
	step(1, false)
	advance(time.Second)
	step(1, true)

	// A pass that found no snapshot (a claim in progress) is not asked
	// again on the next batch either.
	tr.Done(Result{}, nil)
	step(1, false)
	advance(DefaultRetryDelay)
	step(1, true)
}

// TestTriggerUnknownSize: a writer that does not know the size of its
// session's first snapshot starts with 0; without a minimum log the first
// batch starts a pass that measures it, with the default one the first
// batch past DefaultMinLogBytes does.
func TestTriggerUnknownSize(t *testing.T) {
	tr := NewTrigger(0)
	if tr.Uploaded(DefaultMinLogBytes - 1) {
		t.Fatal("a pass was asked for under the minimum log")
	}
	if !tr.Uploaded(1) {
		t.Fatal("the minimum log over an unknown size did not start a pass")
	}
	tr = unbounded.Trigger(0)
	if !tr.Uploaded(10) {
		t.Fatal("first batch over an unknown size did not start a pass")
	}
	tr.Done(Result{RuleLogBytes: 10, RuleDBBytes: 1 << 20, LeftLogBytes: 10, LeftDBBytes: 1 << 20}, nil)
	if tr.Uploaded(10) {
		t.Fatal("a pass was asked for with 20 bytes of log over a 1 MiB database")
	}
}

// hotRun drives a Trigger as a replicator writing a small database flat
// out does: a batch of batchBytes lands every every, a pass started takes
// passTime and leaves a new snapshot of dbBytes; time moves only by the
// test's clock. It returns the passes started over d.
func hotRun(t *testing.T, r Rule, dbBytes, batchBytes int64, every, passTime, d time.Duration) int {
	t.Helper()
	clock := buckettest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tr := r.Trigger(dbBytes)
	tr.now = clock.Now
	start := clock.Now()
	passes := 0
	var passEnds time.Time
	running := false
	for clock.Now().Sub(start) < d {
		clock.Advance(every)
		if running && !clock.Now().Before(passEnds) {
			tr.Done(Result{Snapshot: "s", LeftLogBytes: 0, LeftDBBytes: dbBytes}, nil)
			running = false
		}
		if tr.Uploaded(batchBytes) {
			if running {
				t.Fatal("a second pass was asked for while one runs")
			}
			passes++
			running, passEnds = true, clock.Now().Add(passTime)
		}
	}
	return passes
}

// TestTriggerBoundsHotSmallDatabase: on a 1.15 MB database written so fast
// that every batch holds about all of it, the size rule alone asks for a
// pass after every batch a running pass does not hide; the Rule's minimum
// log and minimum interval bound that, each on its own, by the numbers
// they promise: passes ≤ log uploaded / MinLogBytes, and ≤ time /
// MinInterval.
func TestTriggerBoundsHotSmallDatabase(t *testing.T) {
	const (
		db    = 1_150_000
		batch = 1_000_000             // about the whole database, merged
		every = 25 * time.Millisecond // a paced batch
		pass  = 60 * time.Millisecond // a pass over a megabyte
		run   = time.Minute
	)
	logBytes := int64(run/every) * batch

	// Without the bounds: a pass per batch or two, back to back (40
	// batches a second, a pass takes 60 ms).
	n := hotRun(t, unbounded, db, batch, every, pass, run)
	t.Logf("the size rule alone: %d passes in %v", n, run)
	if n < int(run/(3*every)) {
		t.Fatalf("the size rule alone started %d passes in %v; the workload is meant to make it fire about every other batch (%d)", n, run, run/(2*every))
	}

	for _, c := range []struct {
		name string
		r    Rule
		max  int
	}{
		// The default Rule: at most one pass a second.
		{"default", Rule{}, int(run/DefaultMinInterval) + 1},
		{"minimum interval alone", Rule{MinLogBytes: -1, MinInterval: 5 * time.Second}, int(run/(5*time.Second)) + 1},
		// The minimum log alone: at most one pass per MinLogBytes of log.
		{"minimum log alone", Rule{MinLogBytes: 64 << 20, MinInterval: -1}, int(logBytes/(64<<20)) + 1},
	} {
		n := hotRun(t, c.r, db, batch, every, pass, run)
		t.Logf("%s: %d passes in %v (at most %d)", c.name, n, run, c.max)
		if n > c.max {
			t.Errorf("%s: %d passes in %v of %d MB of log, want at most %d", c.name, n, run, logBytes/1e6, c.max)
		}
		if n == 0 {
			t.Errorf("%s: no pass at all in %v of %d MB of log: the log is never compacted", c.name, run, logBytes/1e6)
		}
	}
}

// TestTriggerMinimumLogAtModestRate: at 100 commits/s on the same database
// (a page of about 4.5 KB per commit, one batch per commit, passes that
// end before the next batch) the size rule alone fires every database-size
// of log; the default minimum log makes that every DefaultMinLogBytes.
func TestTriggerMinimumLogAtModestRate(t *testing.T) {
	const (
		db    = 1_150_000
		batch = 4_500
		every = 10 * time.Millisecond
		run   = 10 * time.Minute
	)
	logBytes := int64(run/every) * batch
	if n, want := hotRun(t, unbounded, db, batch, every, time.Millisecond, run), int(logBytes/db); n < want-1 {
		t.Fatalf("the size rule alone started %d passes over %d MB of log, want about %d", n, logBytes/1e6, want)
	}
	if n, most := hotRun(t, Rule{}, db, batch, every, time.Millisecond, run), int(logBytes/DefaultMinLogBytes)+1; n > most || n == 0 {
		t.Fatalf("the default rule started %d passes over %d MB of log, want 1 to %d", n, logBytes/1e6, most)
	}
}
