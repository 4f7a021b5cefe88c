package session

import "time"

// Observer is told of a database's events as they happen, for metrics
// (package metrics turns them into histograms). Each func is optional. One
// Observer may serve every database of a process, so each must be safe
// for concurrent use; each is called on the goroutine of the event, with
// no lock of the database held, and must return at once: Durable runs on
// the caller's goroutine, after the wait it reports.
//
// Counts that only ever grow within a session (commits, uploads) are in
// Stats; an Observer is for what a metric needs one event at a time, or
// across sessions.
type Observer struct {
	// Durable is called as each Session.Durable call returns, with how long it
	// waited and what it returned. The waits of Sync commits, which hold a
	// commit statement rather than a reply, are not reported.
	Durable func(wait time.Duration, err error)
	// Compaction is called after each background compaction pass
	// (compaction.go), with how long it took and its error: one that
	// matches context.Canceled was cut short because replication stopped.
	Compaction func(took time.Duration, err error)
	// Restore is called after each restore from the bucket that Open (or
	// Reopen) ran to bring the local copy up to date (Stats.Start.From is
	// StartRestored when it succeeded), with how long it took, and its
	// error, which Open then returns.
	Restore func(took time.Duration, err error)
	// Proof is called after each read of own.json that an acknowledgement
	// waited for (proof.go), with how long it took and its error: nil (the
	// claim holds), one matching ErrFenced (another claim), or a failed
	// read, which is retried.
	Proof func(took time.Duration, err error)
}
