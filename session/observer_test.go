package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/internal/dbtest"
)

// observed records what an Observer was told.
type observed struct {
	mu          sync.Mutex
	durable     []error
	compactions []error
	restores    []error
	compacted   chan struct{} // one signal per pass
}

func newObserved() *observed { return &observed{compacted: make(chan struct{}, 64)} }

func (o *observed) observer() Observer {
	return Observer{
		Durable: func(wait time.Duration, err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if wait < 0 {
				err = fmt.Errorf("negative wait %v", wait)
			}
			o.durable = append(o.durable, err)
		},
		Compaction: func(_ time.Duration, err error) {
			o.mu.Lock()
			o.compactions = append(o.compactions, err)
			o.mu.Unlock()
			o.compacted <- struct{}{}
		},
		Restore: func(_ time.Duration, err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.restores = append(o.restores, err)
		},
	}
}

func (o *observed) snapshot() (durable, compactions, restores []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.durable...), append([]error(nil), o.compactions...), append([]error(nil), o.restores...)
}

func (o *observed) waitCompaction(t *testing.T) {
	t.Helper()
	select {
	case <-o.compacted:
	case <-time.After(30 * time.Second):
		t.Fatal("no compaction pass reported within 30 s")
	}
}

// Stats.Pending is the page bytes captured and not yet in the bucket: a
// commit held at the gate is pending, and nothing is once it is durable.
func TestStatsPending(t *testing.T) {
	g := heldGate(buckettest.Dir(t))
	db := replOpen(t, replTestConfig(t, g))
	t.Cleanup(g.Release) // before the Close replOpen's cleanup runs
	c := replConn(t, db)
	require.Zero(t, db.Stats().Pending, "pending before any commit")
	dbtest.Exec(t, c, "CREATE TABLE t(v BLOB); INSERT INTO t VALUES (randomblob(10000))")
	<-g.Waiting()
	st := db.Stats()
	// The commit wrote the new table's pages: at least three of 4 KiB.
	if st.Pending < 3*DefaultPageSize {
		t.Fatalf("pending %d bytes with a commit of a 10 kB row held at the gate", st.Pending)
	}
	g.Release()
	require.NoError(t, db.Durable(t.Context()))
	require.Zero(t, db.Stats().Pending, "pending once durable")
}

// Observer.Durable hears every DB.Durable call as it returns, with what it
// returned; a fenced database's refusal too.
func TestObserverDurable(t *testing.T) {
	o := newObserved()
	cfg := replTestConfig(t, buckettest.Dir(t))
	cfg.Observer = o.observer()
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(v)")
	require.NoError(t, db.Durable(t.Context()))
	require.NoError(t, db.Durable(t.Context()))
	db.Fence()
	errIs(t, db.Durable(t.Context()), ErrFenced)
	durable, _, restores := o.snapshot()
	require.Len(t, durable, 3)
	require.NoError(t, durable[0])
	require.NoError(t, durable[1])
	errIs(t, durable[2], ErrFenced)
	require.Empty(t, restores, "a new actor restores nothing")
}

// Observer.Restore hears the restore an Open runs to bring a new directory
// up to date, and nothing when the local copy is reused.
func TestObserverRestore(t *testing.T) {
	b := buckettest.Dir(t)
	cfg := replTestConfig(t, b)
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(v); INSERT INTO t VALUES (1)")
	closeDB(t, db, c)

	// The same directory, current: reused.
	o := newObserved()
	cfg.Epoch, cfg.Observer = 2, o.observer()
	db = replOpen(t, cfg)
	require.Equal(t, StartReused, db.Stats().Start.From)
	require.NoError(t, db.Close(t.Context()))
	_, _, restores := o.snapshot()
	require.Empty(t, restores, "restores reported for a reused local copy")

	// Another directory: restored from the bucket.
	cfg.Epoch, cfg.Dir = 3, t.TempDir()
	db = replOpen(t, cfg)
	require.Equal(t, StartRestored, db.Stats().Start.From)
	_, _, restores = o.snapshot()
	require.Len(t, restores, 1)
	require.NoError(t, restores[0])
}

// listBlock holds every List while blocked, until its context ends, then
// fails with an error that does not say why (as a backend may: the cause
// of a cancelled request is not always wrapped).
type listBlock struct {
	bucket.Bucket
	blocked atomic.Bool
	waiting chan struct{}
}

func (l *listBlock) List(ctx context.Context, prefix, after string, limit int) (bucket.Page, error) {
	if l.blocked.Load() {
		select {
		case l.waiting <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return bucket.Page{}, &bucket.Error{Op: "list", Key: prefix, Err: errors.New("request interrupted")}
	}
	return l.Bucket.List(ctx, prefix, after, limit)
}

// Observer.Compaction hears each background pass: the session's first
// (its tier pass) succeeds; one cut short because the database was fenced
// is reported with an error matching context.Canceled.
func TestObserverCompaction(t *testing.T) {
	o := newObserved()
	lb := &listBlock{Bucket: buckettest.Dir(t), waiting: make(chan struct{}, 1)}
	cfg := replTestConfig(t, lb)
	cfg.DisableCompaction = false
	cfg.Compaction = compact.Rule{MinLogBytes: -1, MinInterval: -1}
	cfg.Observer = o.observer()
	db := replOpen(t, cfg)
	o.waitCompaction(t)
	_, compactions, _ := o.snapshot()
	require.Len(t, compactions, 1)
	require.NoError(t, compactions[0], "the session's first pass")

	// The next pass (the size rule) blocks on its first listing until the
	// fence cancels it.
	lb.blocked.Store(true)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB); INSERT INTO t SELECT value, randomblob(3000) FROM generate_series(1, 10)")
	started := false
	for i := 0; i < 40 && !started; i++ {
		dbtest.Exec(t, c, "UPDATE t SET v = randomblob(3000)")
		require.NoError(t, db.Durable(t.Context()))
		select {
		case <-lb.waiting:
			started = true
		default:
		}
	}
	if !started {
		select {
		case <-lb.waiting:
		case <-time.After(30 * time.Second):
			t.Fatal("no compaction pass started within 30 s of a log ten times the database's size")
		}
	}
	db.Fence()
	o.waitCompaction(t)
	_, compactions, _ = o.snapshot()
	require.Len(t, compactions, 2)
	errIs(t, compactions[1], context.Canceled)
}
