package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/captured"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/lanes"
)

// Session is one session of one actor's database: from the claim that
// opened it to Close, every commit captured from the local file, batched,
// uploaded and acknowledged (Durable). Open starts one; package framectl
// wraps it with the SQLite side (framectl.DB).
type Session struct {
	cfg    Config
	opened Config // as given to Open, for Reopen
	actor  frames.Actor
	path   string
	rep    *replicator
	detach func()
	own    *fence.Ownership // with a node: the claim to release at Close

	closeOnce sync.Once
	closeErr  error
}

// Local is what a session needs done to its database file that only the
// SQLite side knows how to do: a session knows the file as pages of a
// size, never SQLite's formats. capture.Local is one; package framectl
// wraps it so that the writes a session refuses carry their reason
// (framectl.Refusal). A program that passes capture.Local directly gets
// the refusals, as SQLite I/O errors, without the reason.
type Local interface {
	// Prepare puts the file at path in the state the capture starts from
	// (capture.Prepare): WAL mode, the WAL recovered, checkpointed and
	// truncated; created with pageSize when absent.
	Prepare(ctx context.Context, path string, pageSize int) error
	// PageSize reads the page size of the database file at path.
	PageSize(path string) (uint32, error)
	// Attach puts the file under capture once the session is ready for
	// commits (capture.Attach), its commits going to a.Sink; detach
	// undoes it.
	Attach(path string, a captured.Attachment) (detach func(), err error)
}

// Open opens the database of one actor for one session and starts
// replicating it; local does to the file what only the SQLite side can
// (package framectl's Open passes capture's):
//
//  1. With cfg.Node set, it claims the actor (package fence): a live holder
//     elsewhere is an error matching fence.ErrHeld that names it, so the
//     runtime can forward; otherwise the claim's epoch is the session's.
//     Without a node, cfg.Epoch is the session's, and the caller guarantees
//     no one else writes the actor.
//  2. It brings the local copy up to date (bringUpToDate has the rules):
//     kept when the local state file says it is exactly what the bucket's
//     newest session holds, restored from the bucket otherwise (the newest
//     session that has a snapshot), created empty for an actor the bucket
//     has never seen. It never restores an older state over a newer local
//     copy, and never deletes one that may hold commits the bucket lacks:
//     those are kept, discarded or moved aside (Config.Unacknowledged,
//     Stats.Start).
//  3. It uploads the session's first object, a snapshot of the database as
//     it starts, then replicates every commit. The snapshot is a manifest
//     of chunks (package chunks) naming the session it continues and the
//     seq it continues from; only the chunks the bucket's newest manifest
//     does not name are uploaded, so a wake that changed nothing uploads
//     the manifest alone (Stats.Start counts what it uploaded).
//
// With a node, an acknowledgement by the bucket also requires proof that
// the claim still stands, read from own.json after the upload landed
// (proof.go); the node's lease must be valid too, as an early stop, never
// as the proof. The database stops (ErrFenced) when the proof finds
// another claim, or the node is fenced or loses its lease, and Close
// releases the actor after the final flush.
func Open(ctx context.Context, cfg Config, local Local) (*Session, error) {
	if local == nil {
		return nil, errors.New("session: Open needs a Local (framectl.Open gives the capture's)")
	}
	opened := cfg
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	actor := frames.Actor{Namespace: frames.NamespaceID(cfg.Tenant, cfg.Namespace), Actor: frames.ActorKey(cfg.Actor)}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(cfg.Dir, databaseFile))
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	var own *fence.Ownership
	if cfg.Node != nil {
		o, err := cfg.Node.Claim(ctx, actor, fence.ClaimOptions{Retention: cfg.Retention, Suspect: cfg.Suspect})
		if err != nil {
			return nil, err
		}
		own = &o
		cfg.Epoch = o.Epoch
		cfg.confirm = func(ctx context.Context) error { return cfg.Node.Confirm(ctx, o) }
		ack := cfg.Acknowledge
		cfg.Acknowledge = func() error {
			if err := cfg.Node.Valid(); err != nil {
				return fmt.Errorf("%w: %w", ErrFenced, err)
			}
			if ack != nil {
				return ack()
			}
			return nil
		}
	}
	var tailSafe bool
	s, err := open(ctx, cfg, local, actor, path, own, &tailSafe)
	if err != nil {
		if cfg.Peers != nil && own != nil {
			*own = cfg.Peers.Close(*own)
		}
		if own != nil && len(own.Prev.Followers) > 0 && !tailSafe {
			// The followers may hold commits an older owner acknowledged
			// that the bucket lacks: a release would drop the set from
			// own.json, and the next claimant would not look for them.
			// Keep the claim (it names the set); this node's next claim,
			// or anyone's once its lease ends, takes over again.
			cfg.Logger.Warn("keeping the claim after a failed open: the followers' tail is not in the bucket",
				logattr.Actor, actor.Actor, logattr.Epoch, own.Epoch, logattr.Err, err)
			return nil, err
		}
		if own != nil {
			// Give the claim back (epoch kept) so the next claimant does
			// not wait for this node's lease to run out. The actor's
			// history still ends where the replaced record said.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			var end frames.Seq
			if own.Prev.Released() {
				end = own.Prev.Seq
			}
			if rerr := cfg.Node.Release(rctx, *own, end); rerr != nil {
				cfg.Logger.Warn("releasing a claim after a failed open", logattr.Actor, actor.Actor, logattr.Err, rerr)
			}
		}
		return nil, err
	}
	s.own, s.opened = own, opened
	if cfg.Node != nil {
		go s.watchNode()
	}
	return s, nil
}

// Reopen ends this session and opens the database again on the same
// directory with the same configuration, claiming it for node when node is
// not nil (without a node ever, at Epoch+1). It is how a runtime recovers without restarting its process
// when the database stopped because its node did (a lease lost to an
// outage longer than the lease, a fence): register a new node (Node.Restart)
// once the bucket answers, then Reopen with it. The claim then waits, like
// any other, until the old node's lease has run out on the new node's clock
// (fence.ErrHolderUnseen or fence.ErrHeld until then: retry), and fails
// with ErrHeld naming the holder if a peer took the actor over meanwhile.
// Commits this session captured but never uploaded follow the rules of
// Open (Config.Unacknowledged, Stats.Start): kept or discarded when no one
// else wrote since, moved aside otherwise.
//
// Close every connection first, as for Close. This session is closed (its
// flush may fail: the error is ignored, its commits are handled as above)
// even if the new one fails to open; call Reopen again, or Open.
func (s *Session) Reopen(ctx context.Context, node *fence.Node, local Local) (*Session, error) {
	if err := s.Close(ctx); err != nil {
		s.cfg.Logger.Info("reopening: the old session did not close cleanly", logattr.Actor, s.actor.Actor, logattr.Err, err)
	}
	cfg := s.opened
	switch {
	case node != nil:
		cfg.Node = node
	case cfg.Node == nil:
		cfg.Epoch = s.cfg.Epoch + 1 // the caller's epochs: the next one
	}
	return Open(ctx, cfg, local)
}

// open is Open once the claim is made. It sets *tailSafe once the bucket
// holds every commit the replaced owner's followers may have acknowledged
// (peers.go): until then a failed open must not release the claim.
func open(ctx context.Context, cfg Config, local Local, actor frames.Actor, path string, own *fence.Ownership, tailSafe *bool) (*Session, error) {
	if cfg.Peers == nil && own != nil && len(own.Prev.Followers) > 0 {
		return nil, fmt.Errorf("session: %s records followers %v of epoch %d, which may hold acknowledged commits the bucket lacks: open it with Config.Peers to take over from them",
			actor.OwnKey(), own.Prev.Followers, own.Prev.Epoch)
	}
	start, err := bringUpToDate(ctx, cfg, local, actor, path, own)
	if err != nil {
		return nil, err
	}
	if err := local.Prepare(ctx, path, cfg.PageSize); err != nil {
		return nil, err
	}
	track := start.track
	if track == nil {
		if track, err = trackDatabase(ctx, local, path); err != nil {
			return nil, err
		}
	}
	var tail []follow.Entry
	if cfg.Peers != nil {
		// Fence the previous owner at its followers and take what they
		// hold past the bucket (peers.go). The local copy is the bucket's
		// state: peer mode never keeps unacknowledged commits.
		b := follow.Point{Seq: start.pos.seq, Chain: track.Checksum()}
		if tail, err = cfg.Peers.Takeover(ctx, own.Prev, cfg.Epoch, b); err != nil {
			return nil, fmt.Errorf("session: taking over from the followers of %s: %w", actor.OwnKey(), err)
		}
	}
	if own == nil {
		// Without a claim, own.json still names the newest session (its
		// end once Close records it).
		if err := fence.ReleaseUnclaimed(ctx, cfg.Bucket, actor, cfg.Epoch, 0, cfg.Retention); err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
	}
	if cfg.KeptBytes > 0 {
		// From here on the session's uploads go through the copies it
		// keeps for its compaction passes.
		k, err := openKept(cfg.Bucket, filepath.Join(cfg.Dir, keptDir), actor, cfg.KeptBytes, cfg.Logger)
		if err != nil {
			return nil, err
		}
		cfg.Bucket = k
	}
	first := stateRecord{Epoch: cfg.Epoch, Seq: start.pos.seq, CommitTime: start.pos.commitTime,
		Checksum: track.Checksum(), Pages: track.Pages(), Object: frames.KeySnapshot}
	var base stateRecord
	if start.inBucket != 0 {
		base = stateRecord{Epoch: start.inBucket, Seq: start.pos.seq, CommitTime: start.pos.commitTime,
			Checksum: track.Checksum(), Pages: track.Pages(), Object: frames.KeyLog}
	}
	if err := recordSessionStart(cfg.Dir, track.PageSize(), base, first); err != nil {
		return nil, err
	}
	w, err := uploadSnapshot(ctx, cfg, actor, path, start, track)
	if err != nil {
		return nil, err
	}
	start.how.SnapshotBytes, start.how.ChunksUploaded, start.how.ChunksShared = w.Uploaded(), w.Chunks, w.Skipped
	start.how.ChunksUnread = w.Unread
	cfg.Logger.Info("session started", logattr.Actor, actor.Actor, logattr.Epoch, cfg.Epoch, logattr.Seq, start.pos.seq,
		"from", start.how.From, "pages", track.Pages(), "pageSize", track.PageSize(),
		"uploaded", w.Uploaded(), "chunksUploaded", w.Chunks, "chunksShared", w.Skipped, "chunksUnread", w.Unread)

	stateLog := cfg.Logger.With(logattr.Subsystem, logattr.SubsystemReplicator, logattr.Actor, actor.Actor, logattr.Epoch, cfg.Epoch)
	state, err := createState(cfg.Dir, cfg.Epoch, first, track.PageSize(),
		func(err error) { stateLog.Warn("cannot record local state", logattr.Err, err) })
	if err != nil {
		return nil, err
	}
	pos := start.pos
	if cfg.Peers != nil {
		if len(tail) > 0 {
			if pos, err = uploadTail(ctx, cfg, actor, path, track, state, tail); err != nil {
				state.close()
				return nil, err
			}
		}
		*tailSafe = true
		o, err := cfg.Peers.Start(ctx, *own, follow.Point{Seq: pos.seq, Chain: track.Checksum()})
		if err != nil {
			state.close()
			return nil, fmt.Errorf("session: starting replication to followers of %s: %w", actor.OwnKey(), err)
		}
		*own = o
	}
	rep := newReplicator(cfg, actor, pos, track)
	rep.start = start.how
	rep.state = state
	s := &Session{cfg: cfg, actor: actor, path: path, rep: rep}
	if err := rep.startCompaction(int64(track.Pages())*int64(track.PageSize()), w); err != nil {
		state.close()
		return nil, fmt.Errorf("session: %w", err)
	}
	detach, err := local.Attach(path, captured.Attachment{Sink: sink{rep}})
	if err != nil {
		rep.stopCompaction()
		state.close()
		return nil, err
	}
	s.detach = detach
	rep.startUploads()
	return s, nil
}

// watchNode stops the database as soon as its node stops being live, so
// nothing is acknowledged after a fence even between Durable calls.
func (s *Session) watchNode() {
	select {
	case <-s.cfg.Node.Done():
		s.rep.stop(fmt.Errorf("%w: %w", ErrFenced, s.cfg.Node.Err()))
	case <-s.rep.done:
	}
}

// releaseTimeout bounds giving a claim back after a failed Open: the
// caller's context may be what failed.
const releaseTimeout = 10 * time.Second

// trackDatabase reads the database file once to learn its page size,
// size and checksum.
func trackDatabase(ctx context.Context, local Local, path string) (*lanes.Tracker, error) {
	pageSize, err := local.PageSize(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	defer f.Close()
	t, err := lanes.TrackFile(ctx, f, pageSize)
	if err != nil {
		return nil, fmt.Errorf("session: reading %s: %w", path, err)
	}
	return t, nil
}

// uploadSnapshot writes the session's first object: a manifest of the
// database as it starts, at start.pos (its commit time included, so that a
// point-in-time restore to a moment before the session's first commit
// finds it), with the session's lineage. Only the chunks the bucket's
// newest manifest does not name are uploaded (start.have): a wake that
// changed nothing uploads the manifest alone. chunks.Write checks every
// page it reads against the tracker, so the manifest is exactly the state
// tracked.
func uploadSnapshot(ctx context.Context, cfg Config, a frames.Actor, path string, start sessionStart, t *lanes.Tracker) (chunks.Written, error) {
	key := a.SnapshotKey(cfg.Epoch, start.pos.seq)
	f, err := os.Open(path)
	if err != nil {
		return chunks.Written{}, fmt.Errorf("session: %w", err)
	}
	defer f.Close()
	m := frames.Manifest{Epoch: cfg.Epoch, Seq: start.pos.seq, CommitTime: start.pos.commitTime, Predecessor: start.pred}
	w, err := chunks.Write(ctx, cfg.Bucket, a, m,
		[]lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: t, File: f}},
		chunks.HaveOf(start.prior), chunks.Options{Compression: cfg.Compression, Prior: start.prior})
	if err != nil {
		return chunks.Written{}, fmt.Errorf("session: uploading the session's first snapshot %s: %w", key, err)
	}
	return w, nil
}

// Epoch returns the session's ownership epoch (the claim's, with a node).
func (s *Session) Epoch() frames.Epoch { return s.cfg.Epoch }

// Actor returns the actor the session replicates.
func (s *Session) Actor() frames.Actor { return s.actor }

// Path returns the local database file.
func (s *Session) Path() string { return s.path }

// Durable waits until every commit made before the call is in the bucket,
// or, with followers, held by a quorum of them (peers.go). It returns
// ErrFenced, ErrStopped or ErrClosed (wrapped) once replication has
// stopped, and ctx's error if ctx ends first.
func (s *Session) Durable(ctx context.Context) error {
	f := s.cfg.Observer.Durable
	if f == nil {
		return s.rep.Durable(ctx)
	}
	began := time.Now()
	err := s.rep.Durable(ctx)
	f(time.Since(began), err)
	return err
}

// Stats returns replication counters.
func (s *Session) Stats() Stats { return s.rep.Stats() }

// Fence stops replication because another owner took the database over:
// Durable returns ErrFenced and writes are refused from now on.
func (s *Session) Fence() { s.rep.stop(ErrFenced) }

// Close flushes every commit to the bucket (bounded by ctx), stops
// replicating and detaches the database from the capture. Close
// connections first: writes after Close fail.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closeErr = s.rep.close(ctx)
		if s.cfg.Peers != nil && s.own != nil {
			*s.own = s.cfg.Peers.Close(*s.own)
		}
		s.detach()
		if err := s.rep.state.close(); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("session: %w", err)
		}
		// Release only after a clean flush: otherwise a peer must wait
		// for the lease and restore what did reach the bucket. The
		// release records where the session ended, so that a lost tail
		// is an error, not an older state (fence.Record.Seq).
		if s.closeErr != nil {
			return
		}
		end := s.rep.durable.Load()
		if s.own != nil {
			s.closeErr = s.cfg.Node.Release(ctx, *s.own, end)
		} else {
			s.closeErr = fence.ReleaseUnclaimed(ctx, s.cfg.Bucket, s.actor, s.cfg.Epoch, end, s.cfg.Retention)
		}
	})
	return s.closeErr
}
