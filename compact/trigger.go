package compact

import (
	"sync"
	"time"
)

// DefaultRetryDelay is how long a Trigger waits after a failed pass before
// it starts another: a bucket that refuses a pass is not asked again on
// every batch.
const DefaultRetryDelay = time.Minute

// Trigger tells a writer when to run a compaction pass, from the sizes of
// the batches it uploads, without reading the bucket. It applies its Rule
// (the size rule, a minimum log and a minimum interval between passes) to
// its own running count and lets one pass run at a time. Safe for
// concurrent use.
//
// A pass that is due but held back by the minimum interval starts at the
// first batch after the interval: the Trigger has no timer of its own, and
// a writer that stopped uploading leaves nothing new to compact.
//
// Its count is an estimate: the pass decides again from the bucket, so an
// estimate too high costs one cheap pass that finds nothing due (a listing
// and a snapshot header), and one too low only delays compaction until the
// next batch. After a pass the count restarts from what the pass left
// (Result.LeftLogBytes, LeftDBBytes) plus every batch uploaded while it ran
// (some of which its listing may already have counted: a little high).
type Trigger struct {
	mu         sync.Mutex
	dbBytes    int64 // database size at the newest snapshot
	logBytes   int64 // batch bytes since it
	running    bool
	during     int64     // batch bytes uploaded while a pass runs
	notBefore  time.Time // no new pass before this, after a failure
	lastStart  time.Time // when the last pass started
	rule       Rule      // with its defaults applied
	retryDelay time.Duration
	now        func() time.Time
}

// NewTrigger returns a Trigger with the default Rule for a session that
// starts with a snapshot of a database of dbBytes bytes (pages × page
// size), as framectl.Open uploads.
func NewTrigger(dbBytes int64) *Trigger { return Rule{}.Trigger(dbBytes) }

// Trigger returns a Trigger that applies r, for a session that starts with
// a snapshot of a database of dbBytes bytes.
func (r Rule) Trigger(dbBytes int64) *Trigger {
	return &Trigger{dbBytes: dbBytes, rule: r.withDefaults(), retryDelay: DefaultRetryDelay, now: time.Now}
}

// Uploaded records that a batch object of n bytes is in the bucket. It
// returns true when the caller should start a pass now: the rule is due
// (Rule.Due), no pass is running, the last one started at least
// Rule.MinInterval ago, and none failed in the last DefaultRetryDelay. The
// caller must then call Done exactly once, when the pass ends.
func (t *Trigger) Uploaded(n int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logBytes += n
	if t.running {
		t.during += n
		return false
	}
	now := t.now()
	if !t.rule.Due(t.logBytes, t.dbBytes) || now.Before(t.notBefore) {
		return false
	}
	if t.rule.MinInterval > 0 && !t.lastStart.IsZero() && now.Sub(t.lastStart) < t.rule.MinInterval {
		return false
	}
	t.running, t.during, t.lastStart = true, 0, now
	return true
}

// Done records the end of a pass that Uploaded asked for.
func (t *Trigger) Done(r Result, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = false
	if err != nil || r.LeftDBBytes == 0 && r.Snapshot == "" {
		// A failure, or a pass that found no snapshot to measure against
		// (a claim in progress): asking again on the next batch would
		// find the same.
		t.notBefore = t.now().Add(t.retryDelay)
		return
	}
	t.dbBytes = r.LeftDBBytes
	t.logBytes = r.LeftLogBytes + t.during
}

// Estimate returns the Trigger's current view of the rule's inputs, for
// status pages and metrics.
func (t *Trigger) Estimate() (logBytes, dbBytes int64, running bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.logBytes, t.dbBytes, t.running
}
