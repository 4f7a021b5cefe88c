package peer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/peer"
	"github.com/framectl/framectl/peer/peertest"
)

// The follow protocol end to end over real TCP on 127.0.0.1: an owner
// node owns two actors, fences their followers, recovers, appends commits
// and sees them acknowledged by quorum. The actors' messages share one
// connection per pair of nodes, each frame naming its actor. The
// followers have no address for the owner: their answers go back over
// its connections.

// clusterActors are the actors the owner node owns, each followed by
// every follower node.
var clusterActors = []string{"db-1", "db-2"}

// followerNode is a node holding a follower for each actor; its store is
// memory (the fsync before a reply is the wiring's).
type followerNode struct {
	id   follow.FollowerID
	node *peer.Node
	tr   peer.Transport
	addr string
	mu   sync.Mutex
	f    map[string]*follow.Follower
}

func (fn *followerNode) handle(from follow.FollowerID, actor string, m follow.Message) {
	fn.mu.Lock()
	f := fn.f[actor]
	if f == nil {
		f = follow.NewFollower(follow.Limits{})
		fn.f[actor] = f
	}
	reply := f.Handle(m)
	fn.mu.Unlock()
	if reply != nil {
		// Refused under back-pressure or lost: the owner resends.
		fn.tr.Send(from, actor, reply)
	}
}

func (fn *followerNode) state(actor string) follow.State {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	f := fn.f[actor]
	if f == nil {
		return follow.State{}
	}
	st := f.State()
	st.Entries = append([]follow.Entry(nil), st.Entries...)
	return st
}

// ownerNode runs a takeover of one actor, then the owner it recovers, on
// ticks of real time.
type ownerNode struct {
	actor string
	tr    peer.Transport
	mu    sync.Mutex
	t     *follow.Takeover
	o     *follow.Owner
	err   error
}

func (on *ownerNode) handle(from follow.FollowerID, m follow.Message) {
	on.mu.Lock()
	if on.o != nil {
		on.o.Receive(from, m)
	} else {
		on.t.Receive(from, m)
	}
	out := on.outbox(time.Now())
	on.mu.Unlock()
	on.send(out)
}

// outbox moves the takeover on to its owner once it is done, and returns
// what to send. on.mu held.
func (on *ownerNode) outbox(now time.Time) []follow.Envelope {
	if on.o == nil {
		rec, err, done := on.t.Done()
		switch {
		case !done:
			return on.t.Outbox()
		case err != nil:
			on.err = err
			return nil
		}
		on.o, on.err = follow.NewOwner(rec, follow.OwnerConfig{Retransmit: 50 * time.Millisecond}, now)
		if on.err != nil {
			return nil
		}
	}
	return on.o.Outbox()
}

func (on *ownerNode) send(out []follow.Envelope) {
	for _, env := range out {
		// Refused or lost: Retransmit sends it again.
		on.tr.Send(env.To, on.actor, env.Msg)
	}
}

func (on *ownerNode) tick(now time.Time) {
	on.mu.Lock()
	if on.o != nil {
		on.o.Tick(now)
	} else {
		on.t.Tick(now)
	}
	out := on.outbox(now)
	on.mu.Unlock()
	on.send(out)
}

// owner returns the owner once the takeover recovered it.
func (on *ownerNode) owner() (*follow.Owner, error) {
	on.mu.Lock()
	defer on.mu.Unlock()
	return on.o, on.err
}

type cluster struct {
	node      *peer.Node            // the owner node's
	owners    map[string]*ownerNode // by actor
	followers []*followerNode
	set       []follow.FollowerID
	net       *peertest.Network // nil: no faults
}

// startCluster starts an owner node and n follower nodes, all sharing a
// key, through net when it is not nil, and the owner's takeover of epoch
// 1 with quorum q of each of clusterActors.
func startCluster(t *testing.T, n, q int, net *peertest.Network) *cluster {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	c := &cluster{net: net}
	wrap := func(id follow.FollowerID, h peer.Handler) peer.Handler {
		if net == nil {
			return h
		}
		return net.Handler(id, h)
	}
	transport := func(id follow.FollowerID, node *peer.Node) peer.Transport {
		if net == nil {
			return node
		}
		return net.Transport(id, node)
	}
	for i := range n {
		fn := &followerNode{id: follow.FollowerID(fmt.Sprintf("f%d", i+1)), f: map[string]*follow.Follower{}}
		fn.node, fn.addr = serve(t, peer.Config{ID: fn.id, Key: key, Handler: wrap(fn.id, fn.handle)})
		fn.tr = transport(fn.id, fn.node)
		c.followers = append(c.followers, fn)
		c.set = append(c.set, fn.id)
	}
	c.owners = map[string]*ownerNode{}
	route := func(from follow.FollowerID, actor string, m follow.Message) {
		on := c.owners[actor]
		if on == nil {
			t.Errorf("the owner node got %T from %s for actor %q, which it does not own", m, from, actor)
			return
		}
		on.handle(from, m)
	}
	c.node, _ = serve(t, peer.Config{ID: "owner", Key: key, Handler: wrap("owner", route)})
	tr := transport("owner", c.node)
	for _, fn := range c.followers {
		if err := c.node.SetAddr(fn.id, fn.addr); err != nil {
			t.Fatal(err)
		}
	}
	// Every owner is in c.owners before the first message goes (the
	// handler reads the map unlocked).
	for _, actor := range clusterActors {
		tk, err := follow.NewTakeover(follow.TakeoverConfig{Epoch: 1, Quorum: q, Followers: c.set, Retransmit: 50 * time.Millisecond, Wait: time.Minute}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c.owners[actor] = &ownerNode{actor: actor, tr: tr, t: tk}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case now := <-tick.C:
				for _, on := range c.owners {
					on.tick(now)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	for _, on := range c.owners {
		on.tick(time.Now())
	}
	return c
}

// serve starts a node on a free port of 127.0.0.1.
func serve(t *testing.T, cfg peer.Config) (*peer.Node, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { n.Serve(context.Background(), ln); close(done) }()
	t.Cleanup(func() { n.Close(); <-done })
	return n, ln.Addr().String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func chainAt(seq frames.Seq) frames.Checksum {
	return frames.Checksum(uint64(seq) * 0x9e3779b97f4a7c15)
}

// body is commit seq of actor: the actors' commits differ, so one
// delivered for the wrong actor shows.
func body(actor string, seq frames.Seq) []byte { return fmt.Appendf(nil, "%s commit %d", actor, seq) }

// commit appends commits 1..k of every actor, interleaved, once the
// takeovers recovered the owners, pausing pace after every tenth (so that
// they go in many messages).
func (c *cluster) commit(t *testing.T, k int, pace time.Duration) {
	t.Helper()
	for _, on := range c.owners {
		waitFor(t, "the takeover of "+on.actor+" completes", func() bool {
			o, err := on.owner()
			if err != nil {
				t.Fatal(err)
			}
			return o != nil
		})
	}
	for seq := frames.Seq(1); seq <= frames.Seq(k); seq++ {
		for _, actor := range clusterActors {
			on := c.owners[actor]
			on.mu.Lock()
			err := on.o.Append(follow.Entry{Seq: seq, Before: chainAt(seq - 1), After: chainAt(seq), Body: body(actor, seq)})
			out := on.o.Outbox()
			on.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			on.send(out)
		}
		if seq%10 == 0 {
			time.Sleep(pace)
		}
	}
}

// acked is the lowest seq acknowledged across the actors.
func (c *cluster) acked() frames.Seq {
	low := frames.Seq(1<<63 - 1)
	for _, on := range c.owners {
		on.mu.Lock()
		low = min(low, on.o.Acked())
		on.mu.Unlock()
	}
	return low
}

// holds checks that fn holds commits 1..k of epoch 1 of every actor, as
// sent for that actor.
func holds(t *testing.T, fn *followerNode, k int) bool {
	for _, actor := range clusterActors {
		st := fn.state(actor)
		if st.LogEpoch != 1 || st.End().Seq != frames.Seq(k) {
			return false
		}
		for _, e := range st.Entries {
			if e.After != chainAt(e.Seq) || !bytes.Equal(e.Body, body(actor, e.Seq)) {
				t.Fatalf("%s holds seq %d of %s altered: %q", fn.id, e.Seq, actor, e.Body)
			}
		}
	}
	return true
}

func TestFollowOverTCP(t *testing.T) {
	for _, c := range []struct{ n, q int }{{1, 1}, {2, 2}} {
		t.Run(fmt.Sprintf("%d nodes", c.n+1), func(t *testing.T) {
			cl := startCluster(t, c.n, c.q, nil)
			const k = 200
			cl.commit(t, k, 0)
			waitFor(t, "every commit acknowledged", func() bool { return cl.acked() == k })
			for _, fn := range cl.followers {
				waitFor(t, string(fn.id)+" holds every commit", func() bool { return holds(t, fn, k) })
				if st := fn.node.Stats(); st.Dials != 0 || st.Failed != 0 || st.Accepted != 1 {
					t.Errorf("%s: %+v: want one connection, the owner's, for both actors (it answers over it), no failure", fn.id, st)
				}
			}
		})
	}
}

// The same through the fault network: messages dropped, copied, reordered
// and delayed, one follower of three cut from the owner. q=2 acknowledge
// everything; once healed, the third catches up.
func TestFollowOverFaultyTCP(t *testing.T) {
	net := peertest.New(1)
	defer net.Close()
	net.Set(peertest.Rules{Drop: 0.1, Duplicate: 0.1, Reorder: 0.2, HoldMax: 20 * time.Millisecond, DelayMax: 3 * time.Millisecond})
	net.Partition("owner", "f3")
	cl := startCluster(t, 3, 2, net)
	const k = 300
	cl.commit(t, k, 5*time.Millisecond)
	waitFor(t, "every commit acknowledged by f1 and f2", func() bool { return cl.acked() == k })
	if holds(t, cl.followers[2], k) {
		t.Fatal("f3 holds every commit across the partition")
	}
	net.HealAll()
	waitFor(t, "f3 catches up", func() bool { return holds(t, cl.followers[2], k) })
	st := net.Stats()
	t.Logf("network: %+v", st)
	if st.Dropped == 0 || st.Duplicated == 0 || st.Reordered == 0 || st.Delayed == 0 || st.Partitioned == 0 {
		t.Errorf("some fault never happened: %+v", st)
	}
}
