package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/captured"
	"github.com/framectl/framectl/internal/logattr"
)

// pageTracker follows the live database's size and rolling checksum from
// the commits the capture sees (lanes.Tracker).
type pageTracker interface {
	Write(pgno uint32, data []byte) error
	Resize(pages uint32) error
	Checksum() frames.Checksum
	Pages() uint32
	PageSize() uint32
}

// replicator is the sink of one database (sink.go): it numbers commits, merges them
// into batches and uploads the batches in order, one at a time, retrying
// until each succeeds. While one upload is in flight the next batch grows,
// so the number of PUTs adapts to the bucket's latency (group commit).
//
// Ordering: commit() runs inside the write of the commit WAL frame, with
// SQLite's WAL write lock held, so commits arrive totally ordered; the
// uploader ships batches strictly in sequence, so the bucket's log of a
// session is always a gap-free prefix of what was captured.
type replicator struct {
	cfg   Config
	actor frames.Actor
	log   *slog.Logger

	mu        sync.Mutex
	seq       frames.Seq // last sequence captured
	pages     uint32     // database size after it
	pageSize  uint32
	open      *pendingBatch   // growing batch (nil: none)
	sealed    []*pendingBatch // full batches waiting for the uploader
	pending   int64           // page bytes held in open, sealed and in flight
	stopErr   error           // sticky: why replication stopped
	closing   bool            // flush what is left, then stop
	durableCh chan struct{}   // closed and replaced when durable advances or stopErr is set
	spaceCh   chan struct{}   // closed and replaced when pending shrinks or stopErr is set
	wake      chan struct{}   // cap 1: work for the uploader
	hurry     chan struct{}   // cap 1: someone waits; stop pacing (pace.go)
	waiters   int             // Durable calls (and Sync commits) waiting
	done      chan struct{}   // closed when the uploader has exited
	blocked   atomic.Bool     // writable() must take the slow path
	durable   atomicSeq       // last sequence in the bucket
	told      atomicSeq       // last sequence a waitDurable acknowledged
	pool      *captured.Pool
	proof     prover        // acknowledgements by the bucket (proof.go)
	inflight  *pendingBatch // being uploaded
	freeBatch *pendingBatch // one spare, so a steady stream allocates no maps

	// stopCtx is cancelled when uploads must give up: on any stop but a
	// clean close (which flushes), or when a close's flush times out.
	stopCtx    context.Context
	stopCancel context.CancelFunc

	// track follows the database as uploaded. Only the uploader touches
	// it: it hashes each merged page once per batch, off the commit path.
	track pageTracker

	// Background compaction (compaction.go); trigger is nil when disabled.
	trigger       *compact.Trigger
	compactOpts   compact.Options
	compactCtx    context.Context
	compactCancel context.CancelFunc
	compacting    sync.WaitGroup

	stats counters
	// state, when set, records progress in the local state file (state.go):
	// every commit captured (under mu), every batch before its upload and
	// once it landed (on the uploader).
	state *stateWriter
	// durableTime is the commit time of the last durable commit; only the
	// uploader touches it.
	durableTime int64
	// start is how the session began, for Stats (set before start).
	start Start

	// Peer mode (peers.go); peers is nil without followers.
	peers    Peers
	queue    []queuedCommit // captured, not yet handed to the followers
	shipping bool           // the shipper holds commits taken from queue
	peerFull bool           // the shipper waits for the bucket: upload now
	shipWake chan struct{}  // cap 1: work for the shipper
	shipDone chan struct{}  // closed when the shipper has exited
}

func newReplicator(cfg Config, actor frames.Actor, start position, track pageTracker) *replicator {
	r := &replicator{
		cfg: cfg, actor: actor,
		log:       cfg.Logger.With(logattr.Subsystem, logattr.SubsystemReplicator, logattr.Actor, actor.Actor, logattr.Epoch, cfg.Epoch),
		seq:       start.seq,
		pages:     track.Pages(),
		pageSize:  track.PageSize(),
		track:     track,
		durableCh: make(chan struct{}),
		spaceCh:   make(chan struct{}),
		wake:      make(chan struct{}, 1),
		hurry:     make(chan struct{}, 1),
		done:      make(chan struct{}),
		peers:     cfg.Peers,
		shipWake:  make(chan struct{}, 1),
		shipDone:  make(chan struct{}),
	}
	r.proof = prover{confirm: cfg.confirm, maxAge: cfg.ReadProofAge, stats: &r.stats, observe: cfg.Observer.Proof}
	r.stopCtx, r.stopCancel = context.WithCancel(context.Background())
	r.durable.Store(start.seq)
	r.told.Store(start.seq) // what the previous session held needs a proof now
	r.durableTime = start.commitTime
	return r
}

// atomicSeq is a sequence number read without the replicator's lock.
type atomicSeq struct{ v atomic.Uint64 }

func (a *atomicSeq) Load() frames.Seq   { return frames.Seq(a.v.Load()) }
func (a *atomicSeq) Store(s frames.Seq) { a.v.Store(uint64(s)) }

// raise stores s unless the value is at least s already.
func (a *atomicSeq) raise(s frames.Seq) {
	for old := a.v.Load(); old < uint64(s) && !a.v.CompareAndSwap(old, uint64(s)); old = a.v.Load() {
	}
}

func (r *replicator) startUploads() {
	if r.peers != nil {
		go r.shipLoop()
	} else {
		close(r.shipDone)
	}
	go r.uploadLoop()
}

// writable is called before every WAL write. The fast path is one atomic
// load; it blocks only when the backlog is full, and fails once replication
// has stopped.
func (r *replicator) writable() error {
	if !r.blocked.Load() {
		return nil
	}
	deadline := time.NewTimer(r.cfg.BackpressureTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		if r.stopErr != nil {
			err := r.stopErr
			r.mu.Unlock()
			return err
		}
		if r.pending < int64(r.cfg.MaxPendingBytes) {
			r.mu.Unlock()
			return nil
		}
		ch := r.spaceCh
		pending := r.pending
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			r.stats.backpressureFailures.Add(1)
			return fmt.Errorf("%w: %d bytes waiting for the bucket (limit %d)", ErrBackpressure, pending, r.cfg.MaxPendingBytes)
		}
	}
}

// commit numbers a commit and merges it into the open batch.
func (r *replicator) commit(c *captured.Commit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	queued := false
	defer func() {
		if !queued {
			c.Release()
		}
	}()
	if r.stopErr != nil {
		// Replication stopped between writable() and the commit WAL frame:
		// the commit is in the local WAL only, which the stop error
		// already reports to every caller.
		return
	}
	if r.pool == nil {
		r.pool = c.Pool()
	}
	if c.PageSize != r.pageSize {
		r.stopLocked(fmt.Errorf("%w: page size changed from %d to %d", ErrStopped, r.pageSize, c.PageSize))
		return
	}
	r.seq++
	if r.state != nil {
		r.state.recordCaptured(r.seq)
	}
	var added int64 // to pending
	wake := r.wake
	if r.peers != nil {
		// The shipper numbers nothing: the commit's seq is fixed here,
		// under the WAL write lock, and it merges in this order.
		r.queue = append(r.queue, queuedCommit{seq: r.seq, c: c, prevPages: r.pages})
		queued = true
		added = int64(len(c.Pages)) * int64(r.pageSize)
		wake = r.shipWake
	} else {
		b := r.openBatchLocked(c.PageSize)
		held := b.bytes
		b.add(r.seq, c, r.pages)
		added = b.bytes - held
	}
	r.pages = c.DatabasePages
	r.pending += added
	r.stats.commits.Add(1)
	r.stats.pagesCaptured.Add(int64(len(c.Pages)))
	if r.pending >= int64(r.cfg.MaxPendingBytes) {
		r.blocked.Store(true)
		r.hurryLocked()
	}
	select {
	case wake <- struct{}{}:
	default:
	}
}

// openBatchLocked returns the batch commits merge into, sealing the open
// one for the uploader first once it is full. Called with mu held.
func (r *replicator) openBatchLocked(pageSize uint32) *pendingBatch {
	if r.open == nil || r.open.bytes >= int64(r.cfg.MaxBatchBytes) {
		if r.open != nil {
			r.sealed = append(r.sealed, r.open)
			r.hurryLocked()
		}
		r.open = r.newBatch(pageSize)
	}
	return r.open
}

func (r *replicator) newBatch(pageSize uint32) *pendingBatch {
	b := r.freeBatch
	r.freeBatch = nil
	if b == nil {
		b = &pendingBatch{pages: make(map[uint32][]byte)}
	}
	*b = pendingBatch{pages: b.pages, pageSize: pageSize, pool: r.pool}
	return b
}

// oldestPending returns the capture time of the oldest commit not yet in
// the bucket (zero: none). Called with mu held.
func (r *replicator) oldestPending() time.Time {
	for _, b := range append([]*pendingBatch{r.inflight}, append(r.sealed, r.open)...) {
		if b != nil && b.commits > 0 {
			return b.firstTime
		}
	}
	return time.Time{}
}

// broken stops replication for good: the capture saw a write it cannot
// account for.
func (r *replicator) broken(err error) {
	r.log.Error("replication stopped: write not accounted for", logattr.Err, err)
	r.mu.Lock()
	r.stopLocked(fmt.Errorf("%w: %w", ErrStopped, err))
	r.mu.Unlock()
}

// stop stops replication with err (ErrFenced, ErrClosed...). The first
// error wins.
func (r *replicator) stop(err error) {
	r.mu.Lock()
	r.stopLocked(err)
	r.mu.Unlock()
}

func (r *replicator) stopLocked(err error) {
	if r.stopErr != nil {
		return
	}
	r.stopErr = err
	if !r.closing {
		r.stopCancel()
	}
	if r.compactCancel != nil {
		r.compactCancel() // a pass must not outlive the session's ownership
	}
	r.blocked.Store(true)
	r.hurryLocked()
	close(r.durableCh)
	r.durableCh = make(chan struct{})
	close(r.spaceCh)
	r.spaceCh = make(chan struct{})
	select {
	case r.wake <- struct{}{}:
	default:
	}
	select {
	case r.shipWake <- struct{}{}:
	default:
	}
}

// Durable waits until every commit captured before the call is in the
// bucket, or, in peer mode, held by q followers (peers.go); and the
// acknowledgement hook (if any) agrees.
func (r *replicator) Durable(ctx context.Context) error {
	r.mu.Lock()
	target := r.seq
	r.mu.Unlock()
	return r.waitDurable(ctx, target, r.peers != nil)
}

// waitDurable waits until target is acknowledged: in the bucket, or held
// by q followers when byPeers. Without followers, or once they have not
// answered for PeerWait, it asks the uploader to start at once (an upload
// being paced, or one at PeerUploadInterval, would otherwise wait).
func (r *replicator) waitDurable(ctx context.Context, target frames.Seq, byPeers bool) error {
	waiting := false
	defer func() {
		if waiting {
			r.mu.Lock()
			r.waiters--
			r.mu.Unlock()
		}
	}()
	var fallback <-chan time.Time
	if byPeers {
		t := time.NewTimer(r.cfg.PeerWait)
		defer t.Stop()
		fallback = t.C
	}
	for {
		var acked frames.Seq
		var peerCh <-chan struct{}
		if byPeers {
			var quorum bool
			acked, peerCh, quorum = r.peersAcked()
			if !quorum {
				fallback = nil
			}
		}
		r.mu.Lock()
		// A stopped replicator acknowledges nothing, not even what it
		// uploaded: once fenced, another owner decides what is durable.
		if r.stopErr != nil {
			err := r.stopErr
			r.mu.Unlock()
			return err
		}
		inBucket := r.durable.Load() >= target
		byQuorum := byPeers && acked >= target
		if inBucket || byQuorum {
			r.mu.Unlock()
			if r.cfg.Acknowledge != nil {
				if err := r.cfg.Acknowledge(); err != nil {
					return err
				}
			}
			// The followers' epoch check proves what they hold when they
			// acknowledge it; the bucket's acknowledgement needs its own
			// proof, and so does one of nothing new (proof.go). The
			// owner's Acked counts what the bucket holds too
			// (follow.Owner.BucketDurable), so a commit in the bucket is
			// proven however it was counted: durable is read after acked,
			// and the bucket's point reaches the owner only after durable
			// moved, so a count that came from the bucket finds inBucket.
			reread := target <= r.told.Load()
			if !byQuorum || reread || inBucket {
				if err := r.proof.prove(ctx, target, reread, r.durable.Load); err != nil {
					if errors.Is(err, ErrFenced) {
						r.stop(err)
					}
					return err
				}
			}
			r.told.raise(target)
			if byPeers {
				if inBucket {
					r.stats.ackedByBucket.Add(1)
				} else {
					r.stats.ackedByPeers.Add(1)
				}
			}
			return nil
		}
		if !waiting && fallback == nil {
			// Someone now waits for the bucket: an upload being paced
			// starts at once.
			waiting = true
			r.waiters++
			r.hurryLocked()
		}
		ch := r.durableCh
		r.mu.Unlock()
		select {
		case <-ch:
		case <-peerCh:
		case <-fallback:
			fallback = nil // the bucket is asked from now on
		case <-ctx.Done():
			return fmt.Errorf("session: waiting for sequence %d to be acknowledged (in the bucket: %d, by followers: %d): %w", target, r.durable.Load(), acked, ctx.Err())
		}
	}
}

// phaseTwo runs when a transaction has committed, after SQLite released the
// WAL write lock (FCNTL_COMMIT_PHASETWO). In Sync mode it holds the commit
// statement until the commit is in the bucket; other connections keep
// committing meanwhile, so their commits share uploads.
func (r *replicator) phaseTwo() error {
	if r.cfg.Mode != Sync {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), r.cfg.SyncTimeout, ErrSyncTimeout)
	defer cancel()
	if err := r.Durable(ctx); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	return nil
}

// Once the uploader has waited idleTrimAfter with nothing to upload, it
// drops what the largest batch so far left it (its encoding buffer, its
// page list, the spare batch's map) and all but idleKeepPages of the page
// pool's free buffers (up to poolBytes after a large transaction): a host
// keeps many idle databases open.
const (
	idleTrimAfter = 2 * time.Second
	idleKeepPages = 4
	idleKeepBuf   = 64 << 10
)

// uploadLoop ships batches in order until replication stops, or until it
// is closing and nothing is left.
func (r *replicator) uploadLoop() {
	defer close(r.done)
	var buf bytes.Buffer
	var scratch []frames.Page
	var lastStart time.Time // of the previous upload
	if r.peers != nil {
		// The followers hold what the bucket lacks: the first batch
		// waits its interval too, counted from the session's start.
		lastStart = time.Now()
	}
	idle := time.NewTimer(idleTrimAfter)
	defer idle.Stop()
	trimmed := true // nothing held yet
	for {
		r.mu.Lock()
		var b *pendingBatch
		switch {
		case r.stopErr != nil && !r.closing:
			r.mu.Unlock()
			return
		case len(r.sealed) > 0:
			b = r.sealed[0]
			r.sealed = r.sealed[1:]
		case r.open != nil && r.open.commits > 0:
			if wait := r.paceLocked(lastStart); wait > 0 {
				r.mu.Unlock()
				r.pace(wait)
				continue
			}
			b = r.open
			r.open = nil
		case r.closing && len(r.queue) == 0 && !r.shipping:
			r.mu.Unlock()
			return
		}
		r.inflight = b
		r.mu.Unlock()
		if b == nil {
			if trimmed {
				<-r.wake
				continue
			}
			idle.Reset(idleTrimAfter)
			select {
			case <-r.wake:
			case <-idle.C:
				if buf.Cap() > idleKeepBuf {
					buf = bytes.Buffer{}
				}
				scratch = nil
				r.trimIdle()
				trimmed = true
			}
			continue
		}
		trimmed = false
		lastStart = time.Now()
		select { // a hurry meant for an earlier wait is answered by this upload
		case <-r.hurry:
		default:
		}
		var f frames.Frame
		var err error
		if b.presealed {
			// The shipper computed the checksums, commit by commit.
			f = b.frame(r.cfg.Epoch, scratch)
			f.SQLite.Before, f.SQLite.After = b.before, b.after
		} else if f, err = r.seal(b, scratch); err != nil {
			return
		}
		scratch = f.SQLite.Pages
		if r.state != nil {
			r.state.recordInflight(stateRecord{Epoch: r.cfg.Epoch, Seq: b.last, CommitTime: b.commitTime, Checksum: b.after, Pages: b.dbPages, Object: frames.KeyLog})
		}
		if err := r.upload(&buf, b, f); err != nil {
			// Only a stop ends an upload without success.
			return
		}
		last, lastChain := b.last, b.after
		r.durableTime = b.commitTime
		// Recorded before anyone is told: the state file is never behind
		// an acknowledgement.
		if r.state != nil {
			r.state.recordDurable(stateRecord{Epoch: r.cfg.Epoch, Seq: last, CommitTime: b.commitTime, Checksum: b.after, Pages: b.dbPages, Object: frames.KeyLog})
		}
		r.mu.Lock()
		r.pending -= b.bytes
		r.inflight = nil
		b.release()
		if r.freeBatch == nil {
			r.freeBatch = b // commit() may reuse it as soon as mu is released
		}
		r.durable.Store(last)
		if r.pending < int64(r.cfg.MaxPendingBytes) && r.stopErr == nil {
			r.blocked.Store(false)
		}
		close(r.durableCh)
		r.durableCh = make(chan struct{})
		close(r.spaceCh)
		r.spaceCh = make(chan struct{})
		r.mu.Unlock()
		if r.peers != nil {
			r.peers.BucketDurable(follow.Point{Seq: last, Chain: lastChain})
		}
		r.uploaded(int64(buf.Len()))
	}
}

// trimIdle drops the spare batch, trims the page pool and closes the state
// file's descriptor, on the uploader while nothing is pending.
func (r *replicator) trimIdle() {
	r.mu.Lock()
	r.freeBatch = nil
	pool := r.pool
	r.mu.Unlock()
	if pool != nil {
		pool.Trim(idleKeepPages)
	}
	if r.state != nil {
		r.state.closeIdle()
	}
}

// seal turns a batch into its frame: pages sorted, and the checksum before
// and after computed by applying the merged pages to the tracker, exactly as
// a replay will (write every page, then set the size).
func (r *replicator) seal(b *pendingBatch, scratch []frames.Page) (frames.Frame, error) {
	b.before = r.track.Checksum()
	f := b.frame(r.cfg.Epoch, scratch)
	for _, p := range f.SQLite.Pages {
		if err := r.track.Write(p.Number, p.Data); err != nil {
			return f, r.fail(fmt.Errorf("seq %d..%d: %w", b.first, b.last, err))
		}
	}
	if err := r.track.Resize(b.dbPages); err != nil {
		return f, r.fail(fmt.Errorf("seq %d..%d: %w", b.first, b.last, err))
	}
	b.after = r.track.Checksum()
	f.SQLite.Before, f.SQLite.After = b.before, b.after
	return f, nil
}

// fail stops replication over an internal inconsistency and returns the
// stop error.
func (r *replicator) fail(err error) error {
	err = fmt.Errorf("%w: %w", ErrStopped, err)
	r.log.Error("replication stopped", logattr.Err, err)
	r.stop(err)
	return err
}

// upload encodes a batch once and PUTs it until it lands. Retries back off
// exponentially with jitter; they stop only when replication stops (and,
// when closing, not even then: a clean close flushes).
func (r *replicator) upload(buf *bytes.Buffer, b *pendingBatch, f frames.Frame) error {
	buf.Reset()
	if _, err := frames.WriteBatch(buf, r.cfg.Epoch, []frames.Frame{f}, frames.WriteOptions{Level: r.cfg.Compression}); err != nil {
		// The capture produced an invalid frame: a bug, and nothing
		// after it can be replicated.
		return r.fail(fmt.Errorf("encoding the frame of seq %d..%d: %w", b.first, b.last, err))
	}
	key := r.actor.LogKey(r.cfg.Epoch, b.last)
	backoff := r.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		start := time.Now()
		_, err := r.cfg.Bucket.Put(r.stopCtx, key, bytes.NewReader(buf.Bytes()), int64(buf.Len()), bucket.Condition{})
		r.stats.puts.Add(1)
		if err == nil {
			r.stats.batches.Add(1)
			r.stats.shipped.Add(int64(b.commits))
			r.stats.bytesRaw.Add(b.rawBytes)
			r.stats.bytesMerged.Add(b.bytes)
			r.stats.bytesUploaded.Add(int64(buf.Len()))
			r.stats.lastPutNanos.Store(int64(time.Since(start)))
			if attempt > 1 {
				r.log.Info("upload succeeded after retries", logattr.Key, key, "attempts", attempt)
			}
			r.stats.setUploadError(nil)
			return nil
		}
		r.stats.retries.Add(1)
		r.stats.setUploadError(err)
		if r.stopCtx.Err() != nil {
			return r.stopCtx.Err()
		}
		r.log.Warn("upload failed; retrying", logattr.Key, key, logattr.Attempt, attempt, "backoff", backoff, logattr.Err, err)
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(wait):
		case <-r.stopCtx.Done():
		}
		backoff = min(2*backoff, r.cfg.RetryMax)
	}
}

// close flushes every captured commit to the bucket (bounded by ctx), then
// stops the uploader. Later writes fail with ErrClosed.
func (r *replicator) close(ctx context.Context) error {
	r.mu.Lock()
	target := r.seq
	r.mu.Unlock()
	flushErr := r.waitDurable(ctx, target, false) // a release says the bucket holds it all
	r.mu.Lock()
	if r.stopErr == nil {
		// Commits that slip in between the flush and here are still
		// uploaded: a closing uploader drains before it exits.
		r.closing = true
		r.stopLocked(ErrClosed)
	}
	r.mu.Unlock()
	if flushErr != nil {
		r.stopCancel()
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		r.stopCancel()
		<-r.done
		if flushErr == nil {
			flushErr = fmt.Errorf("session: close: flushing: %w", ctx.Err())
		}
	}
	<-r.shipDone
	r.stopCompaction()
	if errors.Is(flushErr, ErrClosed) {
		return nil
	}
	return flushErr
}
