package vfs

import "time"

// Upload pacing.
//
// The uploader starts the next upload as soon as the previous one is done
// (group commit: what arrives meanwhile shares the next PUT). Against a
// remote bucket the PUT's own latency spaces uploads out. Against a bucket
// on the local disk a PUT takes a millisecond or two, so a busy database
// would upload a batch of a few commits every couple of milliseconds, and
// every one of those uploads fsyncs a file and its directory on the disk
// the database's WAL is fsynced on: at synchronous=FULL the WAL's fsyncs
// wait behind them and the commit rate drops by more than half
// (BENCHMARKS.md).
//
// So when nobody is waiting for the bucket, the uploader starts an upload
// no sooner than Config.UploadInterval after the previous one started, and
// the batch grows meanwhile. Whenever somebody waits (a Durable call, a
// Sync commit, a writer held by backpressure, Close), or a batch is full,
// the upload starts at once: pacing only ever delays what nobody is
// waiting for, so it never adds to an acknowledgement's latency; it bounds
// how far the bucket trails an async writer that does not ask (the lag in
// Stats) at the interval plus one PUT.

// paceLocked returns how long to wait before uploading the open batch, or
// 0 to upload it now. Called by the uploader with mu held.
func (r *replicator) paceLocked(lastStart time.Time) time.Duration {
	if r.cfg.UploadInterval <= 0 || r.waiters > 0 || r.closing || r.stopErr != nil || r.blocked.Load() {
		return 0
	}
	return r.cfg.UploadInterval - time.Since(lastStart)
}

// pace waits for d, or until hurryLocked says someone is waiting.
func (r *replicator) pace(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.hurry:
	}
}

// hurryLocked tells a pacing uploader to look again at once. Called with
// mu held, after changing what paceLocked reads.
func (r *replicator) hurryLocked() {
	select {
	case r.hurry <- struct{}{}:
	default:
	}
}
