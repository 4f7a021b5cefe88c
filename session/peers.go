package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/captured"
)

// Acknowledgement by followers.
//
// With Config.Peers set, a commit is acknowledged (Durable returns, a Sync
// commit completes) once q of the actor's n followers hold it on disk, or
// once the bucket does, whichever comes first. Package follow has the
// protocol and the exact rule of which failures an acknowledged commit
// survives; Peers runs it for this session (package quorum over the
// network). The bucket is then written in the background: uploads are
// paced at DefaultPeerUploadInterval and batches close at MaxBatchBytes, so
// a busy actor makes one PUT per interval instead of one per Durable.
//
// Every commit becomes one follow.Entry: its sequence number, the rolling
// database checksum before and after it, and its frame encoded as a batch
// of one (frames.WriteBatch), which is what a takeover uploads if the
// bucket never got it. The shipper (shipLoop) computes the checksums off
// the commit path, hands each entry to the followers in commit order, and
// only then merges the commit into the batch the uploader will send: so
// the bucket's batches are runs of whole entries, and the bucket's durable
// point is always a point of the followers' log (follow: Takeover compares
// them by chain value).
//
// A Durable call that the followers do not answer within Config.PeerWait
// asks the bucket too (the upload starts at once, as without followers),
// and so does one made while fewer than q followers can answer (none
// chosen, or failed): with too few followers, acknowledgements slow to a
// PUT's, they do not stop. Once a follower says a newer epoch fenced this
// one (Peers.Err), the database stops with ErrFenced, as it does when the
// node's lease is lost.
//
// At Open, before the session's first snapshot, Peers.Takeover fences the
// followers the replaced own.json recorded and returns the commits they
// hold past the bucket's durable point: the tail an older owner may have
// acknowledged without the bucket. The session's first manifest is the
// bucket's state, and the tail is its first batch (tail.go), uploaded
// before Open returns: so every acknowledged commit is in the bucket
// before anything new is, and a restore to any of them works as to any
// other commit.

// Peers is one session's follower set in peer mode (Config.Peers), for
// a database opened with a Node. Open calls Takeover, then Start, then
// the replicator calls Append for every commit in order, BucketDurable
// after every upload, and Close once the session ended.
type Peers interface {
	// Takeover fences epoch's predecessors at the followers prev (the
	// own.json this session's claim replaced) records, and returns the
	// commits they hold past b, the bucket's durable point: chained from
	// b, each Body a batch of one frame. No followers recorded: nothing,
	// at once. It fails rather than return a tail that may miss an
	// acknowledged commit (follow: "When too few followers answer").
	Takeover(ctx context.Context, prev fence.Record, epoch frames.Epoch, b follow.Point) ([]follow.Entry, error)
	// Start begins the session's replication to followers from at, a point
	// the bucket holds: it chooses the followers, records them in own.json
	// (the Ownership returned replaces own) and returns once they may
	// acknowledge. A node alone may start with no followers: every
	// acknowledgement is then the bucket's.
	Start(ctx context.Context, own fence.Ownership, at follow.Point) (fence.Ownership, error)
	// Append hands over the next commit. It never waits on the network;
	// follow.ErrBackpressure says the followers hold their bound past the
	// bucket's durable point, to be retried once the bucket caught up.
	Append(e follow.Entry) error
	// BucketDurable reports that the bucket holds every commit through p.
	BucketDurable(p follow.Point)
	// Acked returns the highest sequence number q followers hold in the
	// session's epoch; whether q followers can acknowledge at all now
	// (false: none chosen, or too many failed: acknowledgements are asked
	// of the bucket at once); and a channel closed once either may have
	// changed or Err may have become non-nil.
	Acked() (seq frames.Seq, changed <-chan struct{}, quorum bool)
	// Err is non-nil once the followers will acknowledge nothing more for
	// this epoch: a newer one fenced it (follow.ErrSuperseded).
	Err() error
	// Close ends the session's use of the followers and returns own (the
	// claim as Start returned it) as the followers leave it: a set
	// replaced while the session ran rewrote own.json, and Release must
	// match that version.
	Close(own fence.Ownership) fence.Ownership
}

// queuedCommit is a commit captured in peer mode, waiting for the shipper.
type queuedCommit struct {
	seq       frames.Seq
	c         *captured.Commit
	prevPages uint32 // database size before it
}

// shipLoop hands every captured commit to the followers in order, then
// merges it into the open batch for the uploader. It exits once
// replication stops, or once it is closing and nothing is queued.
func (r *replicator) shipLoop() {
	defer close(r.shipDone)
	var buf bytes.Buffer
	var q []queuedCommit
	for {
		r.mu.Lock()
		q, r.queue = r.queue, q[:0]
		stopped := r.stopErr != nil && !r.closing
		closing := r.closing
		r.shipping = len(q) > 0 && !stopped
		r.mu.Unlock()
		if stopped {
			releaseQueued(q)
			return
		}
		if len(q) == 0 {
			if closing {
				r.wakeUploader()
				return
			}
			<-r.shipWake
			continue
		}
		for i := range q {
			if err := r.ship(&buf, &q[i]); err != nil {
				releaseQueued(q[i:])
				r.mu.Lock()
				r.shipping = false
				r.mu.Unlock()
				r.wakeUploader()
				return
			}
		}
		clear(q)
		r.mu.Lock()
		r.shipping = false
		r.mu.Unlock()
		r.wakeUploader()
	}
}

func releaseQueued(q []queuedCommit) {
	for i := range q {
		if q[i].c != nil {
			q[i].c.Release()
		}
	}
}

func (r *replicator) wakeUploader() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// ship turns one commit into its entry, hands it to the followers, and
// merges the commit into the open batch with the checksums it computed.
func (r *replicator) ship(buf *bytes.Buffer, qc *queuedCommit) error {
	c := qc.c
	before := r.track.Checksum()
	for _, p := range c.Pages {
		if err := r.track.Write(p.Number, p.Data); err != nil {
			return r.fail(fmt.Errorf("seq %d: %w", qc.seq, err))
		}
	}
	if err := r.track.Resize(c.DatabasePages); err != nil {
		return r.fail(fmt.Errorf("seq %d: %w", qc.seq, err))
	}
	after := r.track.Checksum()
	f := frames.Frame{
		Epoch: r.cfg.Epoch, FirstSeq: qc.seq, LastSeq: qc.seq, CommitTime: c.CommitTime, Kind: frames.KindSQLitePages,
		SQLite: frames.SQLitePages{PageSize: c.PageSize, DatabasePages: c.DatabasePages, Pages: c.Pages, Before: before, After: after},
	}
	buf.Reset()
	if _, err := frames.WriteBatch(buf, r.cfg.Epoch, []frames.Frame{f}, frames.WriteOptions{Level: frames.DefaultLevel}); err != nil {
		return r.fail(fmt.Errorf("encoding the entry of seq %d: %w", qc.seq, err))
	}
	e := follow.Entry{Seq: qc.seq, Before: before, After: after, Body: bytes.Clone(buf.Bytes())}
	for {
		err := r.peers.Append(e)
		if err == nil {
			break
		}
		if !errors.Is(err, follow.ErrBackpressure) {
			err = fmt.Errorf("%w: %w", ErrFenced, err)
			r.stop(err)
			return err
		}
		// The followers hold their bound past the bucket: what is merged
		// so far must reach the bucket before they take more.
		r.mu.Lock()
		if r.stopErr != nil && !r.closing {
			err := r.stopErr
			r.mu.Unlock()
			return err
		}
		r.peerFull = true
		r.hurryLocked()
		ch := r.durableCh
		r.mu.Unlock()
		r.stats.peerBackpressure.Add(1)
		<-ch
		r.mu.Lock()
		r.peerFull = false
		r.mu.Unlock()
	}
	r.stats.entries.Add(1)

	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.openBatchLocked(c.PageSize)
	if b.commits == 0 {
		b.before = before
	}
	raw, held := int64(len(c.Pages))*int64(r.pageSize), b.bytes
	b.add(qc.seq, c, qc.prevPages)
	b.after, b.presealed = after, true
	r.pending += b.bytes - held - raw
	if r.pending < int64(r.cfg.MaxPendingBytes) && r.stopErr == nil && r.blocked.Load() {
		r.blocked.Store(false)
		close(r.spaceCh)
		r.spaceCh = make(chan struct{})
	}
	c.Release()
	qc.c = nil
	return nil
}

// peersAcked is Peers.Acked, once it checked that no newer epoch fenced
// this one (it stops replication with ErrFenced if one did).
func (r *replicator) peersAcked() (frames.Seq, <-chan struct{}, bool) {
	if err := r.peers.Err(); err != nil {
		r.stop(fmt.Errorf("%w: %w", ErrFenced, err))
	}
	return r.peers.Acked()
}
