package compact

import (
	"errors"
	"testing"
	"time"
)

// TestTrigger: the Trigger asks for a pass when the rule is due, never for
// two at once, restarts its count from what the pass left plus what was
// uploaded meanwhile, and waits after a failure.
func TestTrigger(t *testing.T) {
	now := time.Now()
	tr := NewTrigger(1000)
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
// session's first snapshot starts with 0; the first batch starts a pass
// that measures it.
func TestTriggerUnknownSize(t *testing.T) {
	tr := NewTrigger(0)
	if !tr.Uploaded(10) {
		t.Fatal("first batch over an unknown size did not start a pass")
	}
	tr.Done(Result{RuleLogBytes: 10, RuleDBBytes: 1 << 20, LeftLogBytes: 10, LeftDBBytes: 1 << 20}, nil)
	if tr.Uploaded(10) {
		t.Fatal("a pass was asked for with 20 bytes of log over a 1 MiB database")
	}
}
