package quorum_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/peer"
	"github.com/framectl/framectl/peer/peertest"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
	"github.com/framectl/framectl/tails"
)

// A node of an in-process cluster: a fence node (its lease gives the
// peer address), a peer transport on 127.0.0.1, a follower store and a hub.
type node struct {
	fn    *fence.Node
	pn    *peer.Node
	hub   *quorum.Hub
	store *tails.Store
	cfg   quorum.Config
	key   []byte // the cluster's
	once  sync.Once
}

var testLease = fence.Options{Lease: 600 * time.Millisecond, Grace: 300 * time.Millisecond}

func startNode(t testing.TB, b bucket.Bucket, key []byte) *node {
	return startNodeWith(t, b, key, nodeOptions{})
}

// nodeOptions vary a test node.
type nodeOptions struct {
	store tails.Config      // the follower store's
	net   *peertest.Network // faults between the nodes (nil: none)
	clock fence.Clock       // the fence node's (nil: the system's)
}

func startNodeWith(t testing.TB, b bucket.Bucket, key []byte, o nodeOptions) *node {
	t.Helper()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	store, err := tails.Open(t.TempDir(), o.store)
	require.NoError(t, err)
	opts := testLease
	opts.PeerAddress, opts.Follower, opts.Clock = ln.Addr().String(), store.ID(), o.clock
	fn, err := fence.Register(ctx, b, "127.0.0.1:1", opts)
	require.NoError(t, err)
	n := &node{fn: fn, store: store, key: key}
	self := follow.FollowerID(store.ID())
	var h peer.Handler = func(from follow.FollowerID, actor string, m follow.Message) { n.hub.Handle(from, actor, m) }
	if o.net != nil {
		h = o.net.Handler(self, h)
	}
	n.pn, err = peer.NewNode(peer.Config{ID: self, Key: key, Handler: h})
	require.NoError(t, err)
	var tr quorum.Transport = n.pn
	if o.net != nil {
		tr = o.net.Transport(self, n.pn)
	}
	n.cfg = quorum.Config{Self: self, Transport: tr, Store: store,
		Directory: quorum.NewLeases(fn, n.pn), TakeoverWait: 5 * time.Second, ReplaceCheck: 200 * time.Millisecond}
	n.hub, err = quorum.New(n.cfg)
	require.NoError(t, err)
	go n.pn.Serve(ctx, ln)
	t.Cleanup(func() { n.kill() })
	return n
}

func (n *node) id() follow.FollowerID { return follow.FollowerID(n.store.ID()) }

// kill stops the node as a crash would, but for its lease, which it
// deletes so that a claim need not wait for it to run out.
func (n *node) kill() {
	n.once.Do(func() {
		n.hub.Close()
		n.pn.Close()
		n.fn.Close(context.Background())
		n.store.Close()
	})
}

func clusterKey(t testing.TB) []byte {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

// testActor is the actor every test writes.
var testActor = frames.Actor{Namespace: frames.NamespaceID("", "q"), Actor: frames.ActorKey([]byte("counter"))}

// openActor opens the actor on n in peer mode, retrying while the claim
// waits for a dead holder's lease.
func openActor(t testing.TB, n *node, b bucket.Bucket, dir string) *framectl.DB {
	db, _ := openSession(t, n, b, dir)
	return db
}

// openSession is openActor, with the session.
func openSession(t testing.TB, n *node, b bucket.Bucket, dir string) (*framectl.DB, *quorum.Session) {
	t.Helper()
	return openPaced(t, n, b, dir, time.Hour)
}

// openPaced is openSession with uploads every (0: peer mode's default,
// session.DefaultPeerUploadInterval): the tests' hour keeps every commit at
// the followers alone.
func openPaced(t testing.TB, n *node, b bucket.Bucket, dir string, every time.Duration) (*framectl.DB, *quorum.Session) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := n.hub.Session(testActor)
		db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: "q", Actor: []byte("counter"), Dir: dir, Node: n.fn,
			Peers: s, UploadInterval: every})
		if err == nil {
			return db, s
		}
		if time.Now().After(deadline) || !(errors.Is(err, fence.ErrHolderUnseen) || errors.Is(err, fence.ErrHeld)) {
			require.NoError(t, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func insert(t *testing.T, db *framectl.DB, c *sqlite3.Conn, i int) {
	t.Helper()
	s, _, err := c.Prepare("INSERT INTO t(i) VALUES (?)")
	require.NoError(t, err)
	require.NoError(t, s.BindInt(1, i))
	require.NoError(t, s.Exec())
	require.NoError(t, s.Close())
	require.NoError(t, db.Durable(context.Background()))
}

func rows(t *testing.T, c *sqlite3.Conn) []int {
	t.Helper()
	s, _, err := c.Prepare("SELECT i FROM t ORDER BY rowid")
	require.NoError(t, err)
	defer s.Close()
	var out []int
	for s.Step() {
		out = append(out, s.ColumnInt(0))
	}
	require.NoError(t, s.Err())
	return out
}

// rowWriter inserts rows 0, 1, 2, … into a database's table t, each
// followed by Durable, and keeps the ones acknowledged: what a zombie
// test then looks for in the new owner's history.
type rowWriter struct {
	db    *framectl.DB
	c     *sqlite3.Conn
	next  int
	acked []int
}

// newRowWriter creates table t in db and makes it durable.
func newRowWriter(t *testing.T, db *framectl.DB) *rowWriter {
	t.Helper()
	c, err := db.Conn()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Exec("CREATE TABLE t(i INTEGER)"))
	require.NoError(t, db.Durable(t.Context()))
	return &rowWriter{db: db, c: c}
}

// write inserts the next row and waits for Durable.
func (w *rowWriter) write(ctx context.Context) error {
	i := w.next
	w.next++
	if err := w.c.Exec(fmt.Sprintf("INSERT INTO t(i) VALUES (%d)", i)); err != nil {
		return err
	}
	if err := w.db.Durable(ctx); err != nil {
		return err
	}
	w.acked = append(w.acked, i)
	return nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// fourNodes starts an owner and three followers on one directory bucket.
func fourNodes(t *testing.T) (bucket.Bucket, []*node) {
	t.Helper()
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	key := clusterKey(t)
	return b, []*node{startNode(t, b, key), startNode(t, b, key), startNode(t, b, key), startNode(t, b, key)}
}

// writeRows creates the table and inserts rows 0..n-1, each with Durable,
// and returns the connection.
func writeRows(t *testing.T, db *framectl.DB, n int) *sqlite3.Conn {
	t.Helper()
	c, err := db.Conn()
	require.NoError(t, err)
	require.NoError(t, c.Exec("CREATE TABLE t(i INTEGER)"))
	require.NoError(t, db.Durable(context.Background()))
	for i := range n {
		insert(t, db, c, i)
	}
	return c
}

// recordedFollower is the node of the first follower own.json records: a
// follower of the old owner, which fences its own store too when it takes
// over.
func recordedFollower(t *testing.T, b bucket.Bucket, ns []*node) *node {
	t.Helper()
	set := followersOf(t, b)
	require.NotEmpty(t, set)
	i := slices.IndexFunc(ns, func(n *node) bool { return n.store.ID() == set[0] })
	require.GreaterOrEqual(t, i, 0, "the first follower recorded is one of the nodes")
	return ns[i]
}

// restoredRows restores the actor from the bucket and returns its rows.
func restoredRows(t *testing.T, b bucket.Bucket) []int {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "r.db")
	_, err := restore.Restore(context.Background(), b, testActor, dest, restore.Options{})
	require.NoError(t, err)
	rc, err := sqlite3.Open(dest)
	require.NoError(t, err)
	defer rc.Close()
	return rows(t, rc)
}

// Commits are acknowledged by the followers, without a PUT each: the
// bucket gets them at Close.
func TestDurableByFollowers(t *testing.T) {
	b, ns := fourNodes(t)
	db := openActor(t, ns[0], b, t.TempDir())
	c := writeRows(t, db, 50)
	st := db.Stats()
	require.Equal(t, int64(51), st.AckedByPeers, "every Durable answered by the followers")
	require.Zero(t, st.AckedByBucket)
	require.Zero(t, st.Batches, "no batch uploaded while the followers acknowledge")

	rec, _, err := fence.ReadRecord(context.Background(), b, testActor)
	require.NoError(t, err)
	require.Len(t, rec.Followers, 3, "own.json records the set")
	require.Equal(t, 2, rec.Quorum)

	require.Equal(t, seq(50), rows(t, c))
	require.NoError(t, c.Close())
	require.NoError(t, db.Close(context.Background()))
	require.Equal(t, seq(50), restoredRows(t, b), "Close flushed every commit to the bucket")
}

// The owner dies with commits the followers acknowledged and the bucket
// never got: the next owner's takeover recovers all of them, in order,
// once, and makes them the bucket's.
func TestTakeoverRecoversAcknowledgedTail(t *testing.T) {
	b, ns := fourNodes(t)
	db := openActor(t, ns[0], b, t.TempDir())
	c := writeRows(t, db, 30)
	require.Zero(t, db.Stats().Batches, "the bucket holds none of them")
	ns[0].kill()

	next := recordedFollower(t, b, ns[1:])
	db2 := openActor(t, next, b, t.TempDir())
	c2, err := db2.Conn()
	require.NoError(t, err)
	require.Equal(t, seq(30), rows(t, c2), "every acknowledged commit recovered, in order, once")
	insert(t, db2, c2, 30)
	require.NoError(t, c2.Close())
	require.NoError(t, db2.Close(context.Background()))
	require.Equal(t, int64(1), next.hub.Stats().TailsRecovered)
	require.Equal(t, seq(31), restoredRows(t, b))
	_ = c.Close()
}
