package session

import (
	"fmt"

	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/frames"
)

// Stats describes a replicated database's replication so far.
type Stats struct {
	Commits       int64 // commits captured
	PagesCaptured int64 // page versions captured (before merging)
	Shipped       int64 // commits shipped in batches
	Batches       int64 // batch objects uploaded
	PUTs          int64 // upload attempts, successful or not
	Retries       int64 // failed upload attempts
	// BytesRaw is the page bytes captured that reached the bucket, before
	// merging; BytesMerged after merging runs (newest page wins);
	// BytesUploaded what the objects weigh compressed.
	BytesRaw, BytesMerged, BytesUploaded int64
	// Captured and Durable are the last sequence numbers captured and in
	// the bucket; Lag is how far the bucket is behind the capture.
	Captured, Durable frames.Seq
	Lag               time.Duration // age of the oldest commit not yet durable (0: none); see Config.UploadInterval
	LastPUT           time.Duration // duration of the last successful upload
	// Pending is the page bytes captured and not yet in the bucket (what
	// Config.MaxPendingBytes bounds).
	Pending int64
	// UploadError is the last upload failure while uploads are failing
	// (nil once one succeeds); UploadFailingSince when that started.
	UploadError          error
	UploadFailingSince   time.Time
	BackpressureFailures int64 // writes refused because the backlog was full
	// Compactions counts background compaction passes (compact.Actor) run
	// for this database, CompactionErrors those that failed.
	Compactions, CompactionErrors int64
	// KeptReads counts the objects compaction passes read from the copies
	// the session keeps of its uploads instead of from the bucket
	// (Config.KeptBytes); KeptFallbacks the passes that failed reading a
	// copy and ran again from the bucket alone.
	KeptReads, KeptFallbacks int64
	// Peer mode (Config.Peers): Entries counts commits handed to the
	// followers; AckedByPeers and AckedByBucket the acknowledgements
	// (Durable calls and Sync commits) that q followers gave first, and
	// that the bucket gave first; PeerBackpressure how often the shipper
	// waited for the bucket because the followers held their bound.
	Entries, AckedByPeers, AckedByBucket, PeerBackpressure int64
	// Proofs counts the reads of own.json that acknowledgements by the
	// bucket waited for (proof.go: one covers every upload before it, and
	// none is made while nobody waits); ProofErrors those that failed
	// without proving a fence (a bucket that did not answer), and were
	// retried.
	Proofs, ProofErrors int64
	// Stopped is why replication stopped, nil while it runs.
	Stopped error
	// Start says how Open found the local copy (session.go).
	Start Start
}

// Start is how a session began: what Open did with the local copy.
type Start struct {
	// From is what the session started from.
	From StartFrom
	// Kept and Discarded count unacknowledged commits the local copy held
	// (commits a previous session captured and never uploaded): kept as
	// part of this session, or dropped by restoring the bucket's state over
	// them (Config.Unacknowledged).
	Kept, Discarded int64
	// Diverged is where the local copy was moved when it could hold
	// commits the bucket does not have and could not be kept (another owner
	// wrote since, or the machine restarted): nothing is deleted. Empty when
	// nothing was moved.
	Diverged string
	// ScratchBytes is what the scratch files of an interrupted restore
	// held, removed at Open.
	ScratchBytes int64
	// The session's first snapshot, a manifest: the bytes it uploaded
	// (the chunks the bucket did not hold, and the manifest), and how many
	// chunks it uploaded and how many it named that the bucket's newest
	// manifest held already; ChunksUnread counts those of the shared that
	// it named by their fingerprint, without reading their pages.
	SnapshotBytes  int64
	ChunksUploaded int
	ChunksShared   int
	ChunksUnread   int
}

// StartFrom is what a session started from.
type StartFrom uint8

const (
	// StartNew: the bucket had nothing for the actor; the session starts
	// from the local file, or an empty database.
	StartNew StartFrom = iota + 1
	// StartReused: the local copy was the bucket's newest state.
	StartReused
	// StartKept: the local copy continued the bucket's newest state with
	// unacknowledged commits, kept (Start.Kept).
	StartKept
	// StartRestored: the bucket's newest state was restored.
	StartRestored
)

func (f StartFrom) String() string {
	switch f {
	case StartNew:
		return "new"
	case StartReused:
		return "reused"
	case StartKept:
		return "kept"
	case StartRestored:
		return "restored"
	}
	return fmt.Sprintf("StartFrom(%d)", uint8(f))
}

// counters are the replicator's live counters.
type counters struct {
	commits, pagesCaptured, shipped, batches, puts, retries atomic.Int64
	bytesRaw, bytesMerged, bytesUploaded                    atomic.Int64
	backpressureFailures                                    atomic.Int64
	compactions, compactionErrors                           atomic.Int64
	keptFallbacks                                           atomic.Int64
	entries, ackedByPeers, ackedByBucket, peerBackpressure  atomic.Int64
	lastPutNanos                                            atomic.Int64
	proofs, proofErrors                                     atomic.Int64

	errMu        sync.Mutex
	uploadErr    error
	failingSince time.Time
}

func (c *counters) setUploadError(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if err == nil {
		c.uploadErr, c.failingSince = nil, time.Time{}
		return
	}
	if c.uploadErr == nil {
		c.failingSince = time.Now()
	}
	c.uploadErr = err
}

// Stats returns a snapshot of the counters.
func (r *replicator) Stats() Stats {
	c := &r.stats
	s := Stats{
		Commits: c.commits.Load(), PagesCaptured: c.pagesCaptured.Load(), Shipped: c.shipped.Load(),
		Batches: c.batches.Load(), PUTs: c.puts.Load(), Retries: c.retries.Load(),
		BytesRaw: c.bytesRaw.Load(), BytesMerged: c.bytesMerged.Load(), BytesUploaded: c.bytesUploaded.Load(),
		BackpressureFailures: c.backpressureFailures.Load(),
		Compactions:          c.compactions.Load(), CompactionErrors: c.compactionErrors.Load(),
		KeptFallbacks: c.keptFallbacks.Load(),
		Entries:       c.entries.Load(), AckedByPeers: c.ackedByPeers.Load(), AckedByBucket: c.ackedByBucket.Load(),
		PeerBackpressure: c.peerBackpressure.Load(),
		Proofs:           c.proofs.Load(), ProofErrors: c.proofErrors.Load(),
		LastPUT: time.Duration(c.lastPutNanos.Load()),
		Durable: r.durable.Load(),
		Start:   r.start,
	}
	if k, ok := r.cfg.Bucket.(*kept); ok {
		s.KeptReads = k.served()
	}
	c.errMu.Lock()
	s.UploadError, s.UploadFailingSince = c.uploadErr, c.failingSince
	c.errMu.Unlock()
	r.mu.Lock()
	s.Captured, s.Pending = r.seq, r.pending
	if t := r.oldestPending(); !t.IsZero() {
		s.Lag = time.Since(t)
	}
	s.Stopped = r.stopErr
	r.mu.Unlock()
	return s
}
