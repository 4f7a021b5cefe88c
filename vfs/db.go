package vfs

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// VFSName is the name the capture VFS is registered under, process-wide,
// the first time a database is opened.
const VFSName = "framectl"

var (
	registerOnce sync.Once
	processVFS   *captureVFS
)

// capture returns the process-wide capture VFS, registering it once.
func capture() *captureVFS {
	registerOnce.Do(func() { processVFS = registerCaptureVFS(VFSName) })
	return processVFS
}

// DB is one replicated SQLite database: a local file whose every commit,
// made through connections from Conn or the DSN, is shipped to the bucket.
type DB struct {
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

// Open opens the database of one actor for one session and starts
// replicating it:
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
// With a node, acknowledgements also require the node's lease to be valid,
// the database stops (ErrFenced) when the node is fenced or loses its lease,
// and Close releases the actor after the final flush.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	opened := cfg
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	actor := frames.Actor{Namespace: frames.NamespaceID(cfg.Tenant, cfg.Namespace), Actor: frames.ActorKey(cfg.Actor)}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("vfs: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(cfg.Dir, databaseFile))
	if err != nil {
		return nil, fmt.Errorf("vfs: %w", err)
	}
	var own *fence.Ownership
	if cfg.Node != nil {
		o, err := cfg.Node.Claim(ctx, actor, fence.ClaimOptions{Retention: cfg.Retention})
		if err != nil {
			return nil, err
		}
		own = &o
		cfg.Epoch = o.Epoch
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
	db, err := open(ctx, cfg, actor, path, own, &tailSafe)
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
				logActor, actor.Actor, logEpoch, own.Epoch, logErr, err)
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
				cfg.Logger.Warn("releasing a claim after a failed open", logActor, actor.Actor, logErr, rerr)
			}
		}
		return nil, err
	}
	db.own, db.opened = own, opened
	if cfg.Node != nil {
		go db.watchNode()
	}
	return db, nil
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
func (db *DB) Reopen(ctx context.Context, node *fence.Node) (*DB, error) {
	if err := db.Close(ctx); err != nil {
		db.cfg.Logger.Info("reopening: the old session did not close cleanly", logActor, db.actor.Actor, logErr, err)
	}
	cfg := db.opened
	switch {
	case node != nil:
		cfg.Node = node
	case cfg.Node == nil:
		cfg.Epoch = db.cfg.Epoch + 1 // the caller's epochs: the next one
	}
	return Open(ctx, cfg)
}

// open is Open once the claim is made. It sets *tailSafe once the bucket
// holds every commit the replaced owner's followers may have acknowledged
// (peers.go): until then a failed open must not release the claim.
func open(ctx context.Context, cfg Config, actor frames.Actor, path string, own *fence.Ownership, tailSafe *bool) (*DB, error) {
	if cfg.Peers == nil && own != nil && len(own.Prev.Followers) > 0 {
		return nil, fmt.Errorf("vfs: %s records followers %v of epoch %d, which may hold acknowledged commits the bucket lacks: open it with Config.Peers to take over from them",
			actor.OwnKey(), own.Prev.Followers, own.Prev.Epoch)
	}
	start, err := bringUpToDate(ctx, cfg, actor, path, own)
	if err != nil {
		return nil, err
	}
	if err := prepareDatabase(ctx, path, cfg.PageSize); err != nil {
		return nil, err
	}
	track := start.track
	if track == nil {
		if track, err = trackDatabase(ctx, path); err != nil {
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
			return nil, fmt.Errorf("vfs: taking over from the followers of %s: %w", actor.OwnKey(), err)
		}
	}
	if own == nil {
		// Without a claim, own.json still names the newest session (its
		// end once Close records it).
		if err := fence.ReleaseUnclaimed(ctx, cfg.Bucket, actor, cfg.Epoch, 0, cfg.Retention); err != nil {
			return nil, fmt.Errorf("vfs: %w", err)
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
		base = stateRecord{Epoch: frames.Epoch(start.inBucket), Seq: start.pos.seq, CommitTime: start.pos.commitTime,
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
	cfg.Logger.Info("session started", logActor, actor.Actor, logEpoch, cfg.Epoch, logSeq, start.pos.seq,
		"from", start.how.From, "pages", track.Pages(), "pageSize", track.PageSize(),
		"uploaded", w.Uploaded(), "chunksUploaded", w.Chunks, "chunksShared", w.Skipped, "chunksUnread", w.Unread)

	stateLog := cfg.Logger.With("subsystem", "replicator", logActor, actor.Actor, logEpoch, cfg.Epoch)
	state, err := createState(cfg.Dir, cfg.Epoch, first, track.PageSize(),
		func(err error) { stateLog.Warn("cannot record local state", logErr, err) })
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
			return nil, fmt.Errorf("vfs: starting replication to followers of %s: %w", actor.OwnKey(), err)
		}
		*own = o
	}
	rep := newReplicator(cfg, actor, pos, track)
	rep.start = start.how
	rep.state = state
	db := &DB{cfg: cfg, actor: actor, path: path, rep: rep}
	if err := rep.startCompaction(int64(track.Pages())*int64(track.PageSize()), w); err != nil {
		state.close()
		return nil, fmt.Errorf("vfs: %w", err)
	}
	detach, err := capture().attach(path, rep)
	if err != nil {
		rep.stopCompaction()
		state.close()
		return nil, err
	}
	db.detach = detach
	rep.startUploads()
	return db, nil
}

// watchNode stops the database as soon as its node stops being live, so
// nothing is acknowledged after a fence even between Durable calls.
func (db *DB) watchNode() {
	select {
	case <-db.cfg.Node.Done():
		db.rep.stop(fmt.Errorf("%w: %w", ErrFenced, db.cfg.Node.Err()))
	case <-db.rep.done:
	}
}

// releaseTimeout bounds giving a claim back after a failed Open: the
// caller's context may be what failed.
const releaseTimeout = 10 * time.Second

// prepareDatabase puts the file in the state capture starts from: WAL
// mode, the WAL checkpointed into the database file and truncated. It uses
// the plain "os" VFS: nothing done here is a commit to replicate (the
// session's first snapshot covers it).
func prepareDatabase(ctx context.Context, path string, pageSize int) error {
	c, err := sqlite3.Open(fileURI(path, "os"))
	if err != nil {
		return fmt.Errorf("vfs: opening %s: %w", path, err)
	}
	defer c.Close()
	c.SetInterrupt(ctx)
	for _, sql := range []string{
		fmt.Sprintf("PRAGMA page_size=%d", pageSize), // ignored by an existing database
		"PRAGMA journal_mode=WAL",
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		if err := c.Exec(sql); err != nil {
			return fmt.Errorf("vfs: %s: %s: %w", path, sql, err)
		}
	}
	s, _, err := c.Prepare("PRAGMA journal_mode")
	if err != nil {
		return fmt.Errorf("vfs: %s: %w", path, err)
	}
	defer s.Close()
	if !s.Step() || s.ColumnText(0) != "wal" {
		return fmt.Errorf("vfs: %s: cannot switch to WAL mode", path)
	}
	return nil
}

// trackDatabase reads the database file once to learn its page size,
// size and checksum.
func trackDatabase(ctx context.Context, path string) (*lanes.Tracker, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vfs: %w", err)
	}
	defer f.Close()
	// The page size is the big-endian 16-bit value at offset 16 of the
	// database header; 1 means 65536 (https://sqlite.org/fileformat.html).
	var hdr [18]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("vfs: %s: reading the database header: %w", path, err)
	}
	pageSize := uint32(binary.BigEndian.Uint16(hdr[16:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	t, err := lanes.TrackFile(ctx, f, pageSize)
	if err != nil {
		return nil, fmt.Errorf("vfs: reading %s: %w", path, err)
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
		return chunks.Written{}, fmt.Errorf("vfs: %w", err)
	}
	defer f.Close()
	m := frames.Manifest{Epoch: cfg.Epoch, Seq: start.pos.seq, CommitTime: start.pos.commitTime, Predecessor: start.pred}
	w, err := chunks.Write(ctx, cfg.Bucket, a, m,
		[]lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: t, File: f}},
		chunks.HaveOf(start.prior), chunks.Options{Compression: cfg.Compression, Prior: start.prior})
	if err != nil {
		return chunks.Written{}, fmt.Errorf("vfs: uploading the session's first snapshot %s: %w", key, err)
	}
	return w, nil
}

func fileURI(path, vfsName string) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: "vfs=" + vfsName}
	return u.String()
}

// Epoch returns the session's ownership epoch (the claim's, with a node).
func (db *DB) Epoch() frames.Epoch { return db.cfg.Epoch }

// Path returns the local database file.
func (db *DB) Path() string { return db.path }

// DSN returns a data source name for database/sql with go-sqlite3's driver
// (import _ "github.com/ncruces/go-sqlite3/driver"; sql.Open("sqlite3",
// db.DSN())). Every connection it opens is replicated.
func (db *DB) DSN() string {
	return fileURI(db.path, VFSName) + "&_pragma=busy_timeout(10000)"
}

// Conn opens a new connection to the database, with a 10 s busy timeout.
// Close it before Close.
func (db *DB) Conn() (*sqlite3.Conn, error) { return db.conn() }

// conn opens a connection with extra URI parameters ("psow=0").
func (db *DB) conn(params ...string) (*sqlite3.Conn, error) {
	uri := fileURI(db.path, VFSName)
	for _, p := range params {
		uri += "&" + p
	}
	c, err := sqlite3.Open(uri)
	if err != nil {
		return nil, err
	}
	if err := c.BusyTimeout(10e9); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Durable waits until every commit made before the call is in the bucket.
// It returns ErrFenced, ErrStopped or ErrClosed (wrapped) once replication
// has stopped, and ctx's error if ctx ends first.
func (db *DB) Durable(ctx context.Context) error {
	f := db.cfg.Observer.Durable
	if f == nil {
		return db.rep.Durable(ctx)
	}
	began := time.Now()
	err := db.rep.Durable(ctx)
	f(time.Since(began), err)
	return err
}

// Stats returns replication counters.
func (db *DB) Stats() Stats { return db.rep.Stats() }

// Fence stops replication because another owner took the database over:
// Durable returns ErrFenced and writes are refused from now on.
func (db *DB) Fence() { db.rep.stop(ErrFenced) }

// Close flushes every commit to the bucket (bounded by ctx), stops
// replicating and detaches the database. Close connections first: writes
// after Close fail.
func (db *DB) Close(ctx context.Context) error {
	db.closeOnce.Do(func() {
		db.closeErr = db.rep.close(ctx)
		if db.cfg.Peers != nil && db.own != nil {
			*db.own = db.cfg.Peers.Close(*db.own)
		}
		db.detach()
		if err := db.rep.state.close(); err != nil && db.closeErr == nil {
			db.closeErr = fmt.Errorf("vfs: %w", err)
		}
		// Release only after a clean flush: otherwise a peer must wait
		// for the lease and restore what did reach the bucket. The
		// release records where the session ended, so that a lost tail
		// is an error, not an older state (fence.Record.Seq).
		if db.closeErr != nil {
			return
		}
		end := db.rep.durable.Load()
		if db.own != nil {
			db.closeErr = db.cfg.Node.Release(ctx, *db.own, end)
		} else {
			db.closeErr = fence.ReleaseUnclaimed(ctx, db.cfg.Bucket, db.actor, db.cfg.Epoch, end, db.cfg.Retention)
		}
	})
	return db.closeErr
}
