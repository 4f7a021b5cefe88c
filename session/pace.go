package session

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
//
// For a directory bucket the interval is a quarter of a second, chosen by
// measurement (framebench versus -phases rate, the 1.1 MB hot database
// written flat out by one connection, 2 rounds; BENCHMARKS.md, "Upload
// pacing for directory buckets"): commit rate over no replication
//
//	interval   NORMAL  FULL   CPU µs/commit NORMAL / FULL
//	25 ms      0.49    0.75   56 / 330
//	250 ms     0.93    1.06   22 / 218
//	1 s        0.92    1.07   20 / 122
//
// At 25 ms every batch of a database rewritten at random holds about the
// whole database, deflated forty times a second; at 250 ms the lag of a
// writer that never asks is still a quarter of S3's default.
//
// An S3 bucket is paced too (DefaultS3UploadInterval), for another
// reason: its PUTs are billed one by one, and their latency of a few
// milliseconds spaces uploads hardly at all. Measured side by side with
// Litestream 0.5.18 on versitygw (framebench versus; BENCHMARKS.md,
// "Upload pacing for S3 buckets"), one connection committing 100 times a
// second to a 1.1 MB database, synchronous=NORMAL:
//
//	interval             PUTs/1,000 commits  lag p50 / p99     bytes up/commit
//	unpaced (before)     999                 2 ms / 22 ms      5.7 K
//	100 ms               101                 56 ms / 110 ms    4.8 K
//	250 ms               42                  132 ms / 256 ms   4.7 K
//	1 s                  12                  518 ms / 1.01 s   4.3 K
//	Litestream, default  14                  533 ms / 1.04 s   4.3 K
//	Litestream, 100 ms   103                 80 ms / 136 ms    5.2 K
//
// (FULL gave the same within a few percent.) One second costs what
// Litestream's default costs in requests, bytes and lag, and a hundredth
// of the PUTs unpaced. Flat out, CPU per commit fell from 53 µs unpaced
// to 24 µs (19 µs without replication; Litestream's default 36 µs) at
// NORMAL, and from 1,164 µs to 190 µs (118 µs; Litestream 364 µs) at
// FULL, where unpaced uploads had cut the commit rate to 0.29 of that
// without replication. It costs no acknowledgement latency (an actor
// runtime's output gate calls Durable, which uploads at once); the lag is
// that of a writer that never asks.

// paceLocked returns how long to wait before uploading the open batch, or
// 0 to upload it now. Called by the uploader with mu held.
func (r *replicator) paceLocked(lastStart time.Time) time.Duration {
	if r.cfg.UploadInterval <= 0 || r.waiters > 0 || r.peerFull || r.closing || r.stopErr != nil || r.blocked.Load() {
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
