package compact_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// testDB is a database replicated through package framectl: real SQLite, real
// capture, real uploads.
type testDB struct {
	t     testing.TB
	db    *framectl.DB
	conn  *sqlite3.Conn
	cfg   session.Config
	actor frames.Actor
}

const testNamespace = "compact-test"

func newActorID() []byte {
	id := make([]byte, 8)
	rand.Read(id)
	return id
}

func actorOf(id []byte) frames.Actor {
	return frames.Actor{Namespace: frames.NamespaceID("", testNamespace), Actor: frames.ActorKey(id)}
}

// newDB opens a new actor's database in a directory of its own: session 1.
func newDB(t testing.TB, b bucket.Bucket) *testDB {
	t.Helper()
	return openDB(t, b, t.TempDir(), newActorID(), 1)
}

// openDB opens (or reopens, with a new epoch) the database in dir, with
// 1 KiB pages: small databases of many pages.
func openDB(t testing.TB, b bucket.Bucket, dir string, id []byte, epoch frames.Epoch) *testDB {
	t.Helper()
	return openDBPage(t, b, dir, id, epoch, 1024)
}

// openDBPage is openDB with the page size of a new database.
func openDBPage(t testing.TB, b bucket.Bucket, dir string, id []byte, epoch frames.Epoch, pageSize int) *testDB {
	t.Helper()
	return openDBMode(t, b, dir, id, epoch, pageSize, session.Async)
}

// openDBMode is openDBPage in the given mode (session.Sync: one batch per
// commit).
func openDBMode(t testing.TB, b bucket.Bucket, dir string, id []byte, epoch frames.Epoch, pageSize int, mode session.Mode) *testDB {
	t.Helper()
	cfg := session.Config{Bucket: b, Namespace: testNamespace, Actor: id, Epoch: epoch, Dir: dir, Mode: mode,
		PageSize: pageSize, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		DisableCompaction: true} // the tests run every pass themselves
	db, err := framectl.Open(t.Context(), cfg)
	require.NoError(t, err)
	c, err := db.Conn()
	if err != nil {
		db.Close(context.Background())
		t.Fatal(err)
	}
	d := &testDB{t: t, db: db, conn: c, cfg: cfg, actor: actorOf(id)}
	t.Cleanup(d.close)
	return d
}

func (d *testDB) close() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	d.db.Close(context.Background())
}

func (d *testDB) exec(sql string) {
	d.t.Helper()
	require.NoError(d.t, d.conn.Exec(sql), "%s", sql)
}

// durable waits for every commit to be in the bucket and returns the last
// sequence number.
func (d *testDB) durable() frames.Seq {
	d.t.Helper()
	require.NoError(d.t, d.db.Durable(d.t.Context()))
	return d.db.Stats().Durable
}

// image returns the database's bytes after a TRUNCATE checkpoint: what a
// replay of the same frames must produce.
func (d *testDB) image() []byte {
	d.t.Helper()
	_, _, err := d.conn.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(d.t, err)
	data, err := os.ReadFile(d.db.Path())
	require.NoError(d.t, err)
	return data
}

// work runs n random write transactions, each one commit: inserts, updates
// of existing rows (log without growth), deletes.
func (d *testDB) work(rng *mrand.Rand, n int) {
	d.t.Helper()
	d.exec("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, b BLOB)")
	for range n {
		var sql string
		switch op := rng.IntN(10); {
		case op < 4:
			sql = fmt.Sprintf("INSERT INTO t(b) VALUES(randomblob(%d))", 50+rng.IntN(1500))
		case op < 9:
			sql = fmt.Sprintf("UPDATE t SET b=randomblob(%d) WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT %d)", 50+rng.IntN(1500), 1+rng.IntN(3))
		default:
			sql = "DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 1)"
		}
		d.exec(sql)
	}
}

// oracle records the database image at durable sequence numbers.
type oracle struct {
	mu     sync.Mutex
	images map[frames.Seq][]byte
}

func newOracle() *oracle { return &oracle{images: map[frames.Seq][]byte{}} }

func (o *oracle) record(seq frames.Seq, image []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.images[seq] = image
}

func (o *oracle) get(seq frames.Seq) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	img, ok := o.images[seq]
	return img, ok
}

// seqs returns the sequence numbers recorded, ascending.
func (o *oracle) seqs() []frames.Seq {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []frames.Seq
	for f := range o.images {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// errUnreachable: the bucket holds no way to the sequence number asked for
// (no snapshot at or before it, or no batch ending exactly at it).
var errUnreachable = errors.New("sequence number not reachable from the objects in the bucket")

// replayTo rebuilds a session from the bucket alone, independently of the
// code under test: the newest snapshot at or before target (0: the newest
// of all), then every batch after it, in order, up to target, through
// package lanes with all its checks. It returns the database bytes and the
// sequence number reached. It stays separate from restore.Replay, which
// compaction itself uses, so that it checks compaction rather than repeats
// it.
func replayTo(t testing.TB, b bucket.Bucket, a frames.Actor, epoch frames.Epoch, target frames.Seq) ([]byte, frames.Seq, error) {
	t.Helper()
	ctx := t.Context()
	inv, err := restore.Take(ctx, b, a)
	if err != nil {
		return nil, 0, err
	}
	s, ok := inv.Session(epoch)
	if !ok {
		return nil, 0, fmt.Errorf("session %d: %w", epoch, errUnreachable)
	}
	var snap restore.Object
	if target == 0 {
		if len(s.Snapshots) == 0 {
			return nil, 0, fmt.Errorf("session %d has no snapshot: %w", epoch, errUnreachable)
		}
		snap = s.Snapshots[len(s.Snapshots)-1]
	} else if snap, ok = s.NewestSnapshotAtOrBefore(target); !ok {
		return nil, 0, fmt.Errorf("no snapshot at or before %d: %w", target, errUnreachable)
	}
	dir, err := os.MkdirTemp(t.TempDir(), "replay")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	rc, _, err := b.Get(ctx, snap.Key)
	if err != nil {
		return nil, 0, err
	}
	sr, m, err := frames.OpenSnapshot(rc, snap.Key, frames.Limits{})
	if err != nil {
		rc.Close()
		return nil, 0, err
	}
	var set *lanes.Set
	if m != nil {
		set, _, err = chunks.Load(ctx, b, a, snap.Key, m, dir, chunks.Options{})
	} else {
		set, err = lanes.LoadSnapshot(ctx, dir, sr, snap.Key)
	}
	rc.Close()
	if err != nil {
		return nil, 0, err
	}
	defer set.Close()
	for _, o := range s.Batches {
		if o.Seq <= set.Seq() {
			continue
		}
		if target != 0 && o.Seq > target {
			break
		}
		rc, _, err := b.Get(ctx, o.Key)
		if err != nil {
			return nil, 0, err
		}
		br, err := frames.NewBatchReader(rc, o.Key, frames.Limits{})
		if err == nil {
			err = set.ReplayBatch(ctx, br, o.Key)
		}
		rc.Close()
		if err != nil {
			return nil, 0, err
		}
	}
	if target != 0 && set.Seq() != target {
		return nil, set.Seq(), fmt.Errorf("replay reached %d, not %d: %w", set.Seq(), target, errUnreachable)
	}
	if err := set.VerifyFiles(ctx); err != nil {
		return nil, 0, err
	}
	l, ok := set.Lane(lanes.MainLane)
	if !ok {
		return nil, 0, errors.New("replayed session has no main lane")
	}
	data, err := os.ReadFile(l.Path)
	return data, set.Seq(), err
}

// mustReplay replays the newest state of a session and fails the test if it
// cannot.
func mustReplay(t testing.TB, b bucket.Bucket, a frames.Actor, epoch frames.Epoch) ([]byte, frames.Seq) {
	t.Helper()
	data, seq, err := replayTo(t, b, a, epoch, 0)
	require.NoError(t, err, "replaying session %d", epoch)
	return data, seq
}

// mustCompact runs a pass over actor a and fails the test if it fails.
func mustCompact(t testing.TB, b bucket.Bucket, a frames.Actor, opts compact.Options) compact.Result {
	t.Helper()
	res, err := compact.Actor(t.Context(), b, a, opts)
	require.NoError(t, err, "compacting %s", a.Prefix())
	return res
}

// sessionState is what the bucket holds of one session, for assertions.
type sessionState struct {
	snapshots []frames.Seq // sequence numbers, ascending
	batches   []frames.Seq // last sequence numbers, ascending
	logBytes  int64        // batches after the newest snapshot
	maxBatch  int64        // largest batch
	newest    restore.Object
}

func stateOf(t testing.TB, b bucket.Bucket, a frames.Actor, epoch frames.Epoch) sessionState {
	t.Helper()
	st, err := stateErr(t.Context(), b, a, epoch)
	require.NoError(t, err)
	return st
}

// stateErr is stateOf for goroutines other than the test's.
func stateErr(ctx context.Context, b bucket.Bucket, a frames.Actor, epoch frames.Epoch) (sessionState, error) {
	inv, err := restore.Take(ctx, b, a)
	if err != nil {
		return sessionState{}, err
	}
	var st sessionState
	s, ok := inv.Session(epoch)
	if !ok {
		return st, nil
	}
	if len(s.Snapshots) > 0 {
		st.newest = s.Snapshots[len(s.Snapshots)-1]
	}
	for _, o := range s.Snapshots {
		st.snapshots = append(st.snapshots, o.Seq)
	}
	var newest frames.Seq
	if len(st.snapshots) > 0 {
		newest = st.snapshots[len(st.snapshots)-1]
	}
	for _, o := range s.Batches {
		st.batches = append(st.batches, o.Seq)
		st.maxBatch = max(st.maxBatch, o.Size)
		if o.Seq > newest {
			st.logBytes += o.Size
		}
	}
	return st, nil
}

// testOptions are the options of a pass in tests: scratch space in the
// test's directory, a logger into the test log.
//
// Live: the writers of these tests write sessions without ending them and
// never compact them themselves (DisableCompaction), so nobody collects
// the chunks a pass's snapshot names; TestSnapshotOnlyByOwner covers the
// default.
func testOptions(t testing.TB) compact.Options {
	return compact.Options{ScratchDir: t.TempDir(), Live: true}
}

// scratchEmpty checks that a pass left nothing in its scratch directory.
func scratchEmpty(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		t.Errorf("scratch directory not cleaned up: %s", filepath.Join(dir, e.Name()))
	}
}
