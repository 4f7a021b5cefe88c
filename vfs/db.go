package vfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
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
	actor  frames.Actor
	path   string
	rep    *replicator
	detach func()

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database of one actor for one
// session, uploads the session's first object (a snapshot of the database
// as it starts), and starts replicating. Epoch must exceed every epoch the
// bucket has seen for the actor.
//
// The local copy in cfg.Dir is used as it is: a single owner restarting on
// the same machine continues from its own file. A node without a local copy
// of an actor the bucket already holds must restore it first (framectl
// restore); claiming ownership and restoring automatically is the job of
// package fence.
func Open(ctx context.Context, cfg Config) (*DB, error) {
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
	_, statErr := os.Stat(path)
	localExists := statErr == nil
	state, _, err := readState(cfg.Dir)
	if err != nil {
		return nil, err
	}
	newest, err := newestInBucket(ctx, cfg.Bucket, actor)
	if err != nil {
		return nil, err
	}
	if newest.session >= cfg.Epoch {
		return nil, fmt.Errorf("vfs: epoch %d is not newer than session %d already in %s for actor %s", cfg.Epoch, newest.session, cfg.Bucket, actor.Prefix())
	}
	if !localExists && newest.session != 0 {
		return nil, fmt.Errorf("vfs: %s holds sessions of actor %s but %s has no local copy: restore it first", cfg.Bucket, actor.Prefix(), cfg.Dir)
	}
	startSeq := max(state.Seq, newest.seq)

	if err := prepareDatabase(ctx, path, cfg.PageSize); err != nil {
		return nil, err
	}
	track, err := trackDatabase(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := uploadSnapshot(ctx, cfg, actor, path, startSeq, track); err != nil {
		return nil, err
	}
	cfg.Logger.Info("session started", logActor, actor.Actor, logEpoch, cfg.Epoch, logSeq, startSeq,
		"pages", track.Pages(), "pageSize", track.PageSize())

	rep := newReplicator(cfg, actor, startSeq, track)
	db := &DB{cfg: cfg, actor: actor, path: path, rep: rep}
	st := localState{Epoch: cfg.Epoch, Seq: startSeq, Checksum: checksumHex(track.Checksum()), Pages: track.Pages(), PageSize: track.PageSize()}
	if err := writeState(cfg.Dir, st); err != nil {
		return nil, fmt.Errorf("vfs: %w", err)
	}
	// Record progress at most every stateInterval, and at Close. Renaming
	// a file over another makes ext4 flush it at once (auto_da_alloc): done
	// per batch, it stalled every fsync of a synchronous=FULL database
	// behind a journal commit and cost 60% of its commit rate.
	var lastState time.Time
	rep.onDurable = func(seq uint64, sum frames.Checksum, pages uint32, final bool) {
		if !final && time.Since(lastState) < stateInterval {
			return
		}
		lastState = time.Now()
		s := st
		s.Seq, s.Checksum, s.Pages = seq, checksumHex(sum), pages
		if err := writeState(cfg.Dir, s); err != nil {
			rep.log.Warn("cannot record local state", logErr, err)
		}
	}
	detach, err := capture().attach(path, rep)
	if err != nil {
		return nil, err
	}
	db.detach = detach
	rep.start()
	return db, nil
}

// stateInterval is how often state.json follows the uploads. It is a lower
// bound either way; a restart after a crash only downloads more than it
// would have with a fresher state.
const stateInterval = 10 * time.Second

// newest is the newest session of an actor in the bucket and the highest
// sequence number it reached (zero: the bucket has nothing).
type newest struct{ session, seq uint64 }

func newestInBucket(ctx context.Context, b bucket.Bucket, a frames.Actor) (newest, error) {
	var n newest
	consider := func(key string) error {
		k, err := frames.ParseKey(key)
		if err != nil {
			return fmt.Errorf("vfs: unexpected object in %s: %w", b, err)
		}
		switch {
		case k.Session > n.session:
			n = newest{k.Session, k.Frame}
		case k.Session == n.session:
			n.seq = max(n.seq, k.Frame)
		}
		return nil
	}
	// Descending session numbers: the first key of each prefix is in the
	// newest session; the newest snapshot of it comes first too.
	page, err := b.List(ctx, a.SnapshotPrefix(), "", 1)
	if err != nil {
		return n, err
	}
	for _, o := range page.Objects {
		if err := consider(o.Key); err != nil {
			return n, err
		}
	}
	page, err = b.List(ctx, a.LogPrefix(), "", 1)
	if err != nil {
		return n, err
	}
	if len(page.Objects) == 0 {
		return n, nil
	}
	k, err := frames.ParseKey(page.Objects[0].Key)
	if err != nil {
		return n, fmt.Errorf("vfs: unexpected object in %s: %w", b, err)
	}
	// Batch end frames ascend within a session: its last batch is last.
	for o, err := range bucket.All(ctx, b, a.LogSessionPrefix(k.Session)) {
		if err != nil {
			return n, err
		}
		if err := consider(o.Key); err != nil {
			return n, err
		}
	}
	return n, nil
}

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

// uploadSnapshot writes the session's first object: the database as it
// starts, at sequence seq. lanes.WriteSnapshot checks every page it reads
// against the tracker, so the snapshot is exactly the state tracked.
func uploadSnapshot(ctx context.Context, cfg Config, a frames.Actor, path string, seq uint64, t *lanes.Tracker) error {
	key := a.SnapshotKey(cfg.Epoch, seq)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("vfs: %w", err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := lanes.WriteSnapshot(ctx, pw, frames.Snapshot{Epoch: cfg.Epoch, Seq: seq},
			[]lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: t, File: f}},
			frames.WriteOptions{Level: cfg.Compression})
		pw.CloseWithError(err)
	}()
	_, err = cfg.Bucket.Put(ctx, key, pr, -1, bucket.Condition{})
	pr.CloseWithError(errors.New("upload ended"))
	if err != nil {
		return fmt.Errorf("vfs: uploading the session's first snapshot %s: %w", key, err)
	}
	return nil
}

func fileURI(path, vfsName string) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: "vfs=" + vfsName}
	return u.String()
}

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
func (db *DB) Durable(ctx context.Context) error { return db.rep.Durable(ctx) }

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
		db.detach()
	})
	return db.closeErr
}
