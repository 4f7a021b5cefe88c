package alarm

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// The tests' host: a real fence node on the test's bucket, whose Acquire
// claims an actor for it (as package host does) and opens it over a plain
// SQLite file: no replication, so Durable returns at once and a commit is
// what the bucket would hold. It is for the tests of the alarms' own
// invariants (storage, index, scans); package host's tests run the alarms
// through the real host.

// hangGuard bounds every wait for something that must happen: reaching it
// fails the test as "never happened", not as "too slow".
const hangGuard = 90 * time.Second

// testHost implements Host. Its mu is the host's lock: the Session's
// lifecycle calls are made with it held, as package host makes them.
type testHost struct {
	t    testing.TB
	b    bucket.Bucket
	node *fence.Node
	svc  *Service
	dir  string
	run  func(ctx context.Context, a *testActor, run Run) error // the handler; nil: none

	mu       sync.Mutex
	actors   map[Key]*testActor
	acquired []Key // every Acquire of the Service's
	draining bool
}

// testActor implements Actor: one open of an actor on the testHost.
type testActor struct {
	h     *testHost
	key   Key
	path  string
	pool  *sql.DB // the runtime's connections
	s     *Session
	epoch frames.Epoch
	lost  chan struct{}

	// Under testHost.mu.
	refs    int
	serving bool
}

// newTestHost starts a Service on b for a host whose node has cfg's lease
// timings; run, if not nil, is the handler of every namespace in
// cfg.Namespaces.
func newTestHost(t testing.TB, b bucket.Bucket, cfg Config, run func(ctx context.Context, a *testActor, run Run) error) *testHost {
	t.Helper()
	node, err := fence.Register(t.Context(), b, "127.0.0.1:1", fence.Options{Lease: cfg.Lease, Grace: cfg.Grace})
	require.NoError(t, err)
	h := &testHost{t: t, b: b, node: node, dir: t.TempDir(), run: run, actors: map[Key]*testActor{}}
	cfg.Bucket = b
	ctx, cancel := context.WithCancel(context.Background())
	h.svc = New(ctx, cfg, h)
	t.Cleanup(func() {
		h.mu.Lock()
		h.svc.Stop()
		h.mu.Unlock()
		cancel()
		h.svc.Wait()
		for _, a := range h.actors {
			a.pool.Close()
		}
		node.Close(context.Background())
	})
	return h
}

func (h *testHost) Acquire(ctx context.Context, key Key) (*Session, func(), error) {
	h.mu.Lock()
	h.acquired = append(h.acquired, key)
	h.mu.Unlock()
	hd, err := h.acquire(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	return hd.s, hd.Done, nil
}

func (h *testHost) Node() *fence.Node { return h.node }

func (h *testHost) Draining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}

// testHandle is a use of an actor, from acquire to Done (once).
type testHandle struct {
	*testActor
	done sync.Once
}

// Done gives the use back, the first time only.
func (hd *testHandle) Done() { hd.done.Do(func() { hd.Release(true) }) }

// acquire returns a use of the actor, claiming and opening it first
// unless it serves already.
func (h *testHost) acquire(ctx context.Context, key Key) (*testHandle, error) {
	h.mu.Lock()
	if a := h.actors[key]; a != nil && a.serving {
		a.refs++
		h.mu.Unlock()
		return &testHandle{testActor: a}, nil
	}
	h.mu.Unlock()
	own, err := h.node.Claim(ctx, h.svc.actorOf(key), fence.ClaimOptions{})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(h.dir, key.Namespace+"-"+key.hex()+".db")
	a := &testActor{h: h, key: key, path: path, epoch: own.Epoch, lost: make(chan struct{})}
	if a.pool, err = sql.Open("sqlite3", a.DSN()); err != nil {
		return nil, err
	}
	// The file exists from here: the alarm operations check it is theirs.
	if _, err := a.pool.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		a.pool.Close()
		return nil, err
	}
	h.mu.Lock()
	a.s = h.svc.NewSession(key, a)
	h.actors[key] = a
	h.mu.Unlock()
	if err := a.s.Index(ctx); err != nil {
		a.s.Disconnect()
		a.pool.Close()
		h.mu.Lock()
		delete(h.actors, key)
		a.s.Gone(time.Time{})
		h.mu.Unlock()
		return nil, err
	}
	h.mu.Lock()
	a.serving, a.refs = true, 1
	a.s.Opened()
	h.mu.Unlock()
	return &testHandle{testActor: a}, nil
}

// use acquires the actor ns/id for the test; the use is given back (Done)
// when the test ends, unless the test gave it back first.
func (h *testHost) use(t testing.TB, ns, id string) *testHandle {
	t.Helper()
	hd, err := h.acquire(t.Context(), Key{ns, id})
	require.NoError(t, err)
	t.Cleanup(hd.Done)
	return hd
}

// closeAll closes every actor as package host's Close does, once its last
// use is given back (a settle holds one for a moment after a release).
func (h *testHost) closeAll(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	all := make([]*testActor, 0, len(h.actors))
	for _, a := range h.actors {
		all = append(all, a)
	}
	h.mu.Unlock()
	for _, a := range all {
		require.True(t, waitFor(func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return a.refs == 0
		}), "%s still in use", a.key)
		a.close(t)
	}
}

// close closes an actor without a use left as package host does: its
// Session finishes (the index entries it left stale are deleted) and the
// actor leaves the map.
func (a *testActor) close(t testing.TB) {
	t.Helper()
	h := a.h
	h.mu.Lock()
	require.Zero(t, a.refs, "closing %s in use", a.key)
	a.serving = false
	a.s.Closing()
	h.mu.Unlock()
	wake := a.s.Finish(t.Context(), false)
	a.s.Disconnect()
	require.NoError(t, a.pool.Close())
	h.mu.Lock()
	if h.actors[a.key] == a {
		delete(h.actors, a.key)
	}
	a.s.Gone(wake)
	h.mu.Unlock()
}

func (a *testActor) Path() string {
	return a.path
}

func (a *testActor) DSN() string {
	u := url.URL{Scheme: "file", OmitHost: true, Path: a.path, RawQuery: "_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)"}
	return u.String()
}

func (a *testActor) Durable(context.Context) error { return nil }
func (a *testActor) Commits() int64                { return 0 } // no test here commits late
func (a *testActor) Epoch() frames.Epoch           { return a.epoch }
func (a *testActor) Lost() <-chan struct{}         { return a.lost }
func (a *testActor) Unusable() error               { return nil }

func (a *testActor) Use() bool {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	if !a.serving {
		return false
	}
	a.refs++
	return true
}

func (a *testActor) Release(bool) {
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	a.refs--
	if a.s.Released() {
		a.refs++
	}
}

func (a *testActor) Run(ctx context.Context, run Run) error {
	if a.h.run == nil {
		return nil
	}
	return a.h.run(ctx, a, run)
}

// alarmAt is a due time of the tests, at millisecond precision.
var alarmAt = time.UnixMilli(1_900_000_000_000)

// actorOf is the bucket element of an actor of the tests (tenant "").
func actorOf(ns, id string) frames.Actor {
	return frames.Actor{Namespace: frames.NamespaceID("", ns), Actor: frames.ActorKey([]byte(id))}
}

// alarmIndex lists a namespace's alarm index.
func alarmIndex(t testing.TB, b bucket.Bucket, ns string) []string {
	t.Helper()
	return buckettest.Keys(t, b, frames.AlarmIndexPrefix(frames.NamespaceID("", ns)))
}

// alarmKeyOf is the index key of an actor's alarm.
func alarmKeyOf(ns, id string, due time.Time, gen uint64) string {
	return actorOf(ns, id).AlarmKey(uint64(due.UnixMilli()), gen)
}

// waitIndex waits until the namespace's alarm index is want (the Session
// settles it in the background after a use is given back).
func waitIndex(t testing.TB, b bucket.Bucket, ns string, want ...string) {
	t.Helper()
	buckettest.WaitKeys(t, b, frames.AlarmIndexPrefix(frames.NamespaceID("", ns)), want...)
}

// waitFor polls cond every 20 ms until it holds; false after hangGuard.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
