package fence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// Errors callers decide on.
var (
	// ErrFenced: a peer judged this node dead and fenced its lease. The node
	// must stop acknowledging and leave; it never becomes live again.
	ErrFenced = errors.New("fence: node fenced by a peer")
	// ErrLeaseLost: the node could not renew its lease within the lease
	// duration; peers may be fencing it now. Terminal, like ErrFenced.
	ErrLeaseLost = errors.New("fence: lease lost")
	// ErrClosed: the node deregistered.
	ErrClosed = errors.New("fence: node closed")
)

// Options tune leases. Zero fields take the defaults.
type Options struct {
	// Lease: how long a renewal keeps the node live, from the moment the
	// renewal began (default 10 s).
	Lease time.Duration
	// Grace: how much longer than Lease a peer waits, on its own clock,
	// after it last saw the heartbeat change (or first saw the lease
	// missing) before it may fence (or claim; default 5 s). It covers
	// clock rate differences and the time a renewal takes.
	Grace time.Duration
	// RenewEvery: interval between renewals (default Lease/3).
	RenewEvery time.Duration
	// Clock (default SystemClock).
	Clock Clock
	// Logger (nil: discard).
	Logger *slog.Logger
	// PeerAddress is where this node serves the follower transport
	// (package peer), host:port, written into every renewal of its lease
	// (Lease.Peer) so that owners choosing followers find it; "" if it
	// serves none.
	PeerAddress string
	// Follower is the follower ID served at PeerAddress (Lease.Follower):
	// required with it, a node ID (frames.ValidNodeID).
	Follower string
}

// Default lease timings.
const (
	DefaultLease = 10 * time.Second
	DefaultGrace = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.RenewEvery <= 0 || o.RenewEvery >= o.Lease {
		o.RenewEvery = o.Lease / 3
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Node is this process's membership: a lease in nodes/<id>.json renewed in
// the background. The ID is random per Register, so a process restarting
// at the same address is a different node and never mistakes its
// predecessor's records for its own.
type Node struct {
	b    bucket.Bucket
	opts Options
	log  *slog.Logger

	id, address string

	mu         sync.Mutex
	heartbeat  uint64
	etag       string
	renewedAt  time.Duration // Clock.BootTime at the start of the last successful renewal
	err        error         // terminal: ErrFenced, ErrLeaseLost, ErrClosed
	done       chan struct{}
	stopRenew  context.CancelFunc
	renewDone  chan struct{}
	Observer   *Observer // judges peers on this node's clock
	registered bool
	noClaims   bool // StopClaiming was called
}

// Register creates this node's lease (create-only) and starts renewing it.
func Register(ctx context.Context, b bucket.Bucket, address string, opts Options) (*Node, error) {
	opts = opts.withDefaults()
	idb := make([]byte, 16)
	if _, err := rand.Read(idb); err != nil {
		return nil, err
	}
	n := &Node{b: b, opts: opts, id: hex.EncodeToString(idb), address: address, done: make(chan struct{})}
	n.log = opts.Logger.With(logattr.Subsystem, logattr.SubsystemFence, logattr.Node, n.id)
	n.Observer = NewObserver(b, opts)
	lease := Lease{Node: n.id, Address: address, Peer: opts.PeerAddress, Follower: opts.Follower}
	if _, err := ParseLease(frames.NodeKey(n.id), lease.Marshal()); err != nil {
		return nil, fmt.Errorf("fence: address %q, peer address %q, follower %q: %w", address, opts.PeerAddress, opts.Follower, err)
	}
	start := opts.Clock.BootTime()
	info, err := b.Put(ctx, frames.NodeKey(n.id), bytes.NewReader(lease.Marshal()), int64(len(lease.Marshal())), bucket.Condition{IfAbsent: true})
	if err != nil {
		// No answer may still mean it landed: the ID is fresh, so a lease
		// under it with our address and heartbeat 0 is ours.
		cur, curInfo, rerr := ReadLease(ctx, b, n.id)
		if rerr != nil || cur != lease {
			return nil, fmt.Errorf("fence: registering node %s: %w", n.id, err)
		}
		info = curInfo
	}
	n.etag, n.renewedAt, n.registered = info.ETag, start, true
	rctx, cancel := context.WithCancel(context.Background())
	n.stopRenew, n.renewDone = cancel, make(chan struct{})
	go n.renewLoop(rctx)
	n.log.Info("node registered", logattr.Address, address)
	return n, nil
}

// Restart registers a new node with this one's bucket, address and
// options, for a process whose node stopped (a fence, a lease lost to an
// outage longer than the lease) and that means to go on without
// restarting. The new node has a new ID: to its peers, and to claims of
// the actors this one held, it is another node, which takes them over only
// once this one's lease has run out on its own clock. The old node stays
// stopped.
func (n *Node) Restart(ctx context.Context) (*Node, error) {
	return Register(ctx, n.b, n.address, n.opts)
}

// ID returns the node ID.
func (n *Node) ID() string { return n.id }

// Bucket is the bucket the node registered in.
func (n *Node) Bucket() bucket.Bucket { return n.b }

// Address returns the node's address.
func (n *Node) Address() string { return n.address }

// PeerAddress returns where the node serves the follower transport
// (Options.PeerAddress), "" if it serves none.
func (n *Node) PeerAddress() string { return n.opts.PeerAddress }

// Valid reports whether the node may acknowledge now: not fenced, not
// closed, and its last successful renewal began less than one lease ago.
// The age is measured on Clock.BootTime, which keeps counting while the
// machine is suspended: peers count that time too (they are not
// suspended), so a node resumed past its lease is no longer valid.
func (n *Node) Valid() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	if age := n.opts.Clock.BootTime() - n.renewedAt; age >= n.opts.Lease {
		n.stopLocked(fmt.Errorf("%w: last renewal began %v ago (lease %v)", ErrLeaseLost, age.Round(time.Millisecond), n.opts.Lease))
		return n.err
	}
	return nil
}

// Done is closed when the node stops being live (fenced, lease lost,
// closed); Err then says why.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err returns why the node stopped, nil while live.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

func (n *Node) stopLocked(err error) {
	if n.err != nil {
		return
	}
	n.err = err
	close(n.done)
	if err != ErrClosed {
		n.log.Warn("node no longer live", logattr.Err, err)
	}
}

// renewLoop renews every RenewEvery, counted from the start of the last
// successful renewal (so a slow PUT does not stretch the interval), retries
// a failed renewal after a quarter of that, and bounds each attempt by
// RenewEvery so that a hung bucket cannot hold it past the lease. Times are
// BootTime readings, like Valid's: a timer pending across a suspension
// fires late, and Valid then ends the node before it renews.
func (n *Node) renewLoop(ctx context.Context) {
	defer close(n.renewDone)
	n.mu.Lock()
	next := n.renewedAt + n.opts.RenewEvery
	n.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.done:
			return
		case <-n.opts.Clock.After(next - n.opts.Clock.BootTime()):
		}
		if err := n.Valid(); err != nil {
			return
		}
		attempt, cancel := context.WithTimeout(ctx, n.opts.RenewEvery)
		ok := n.renew(attempt)
		cancel()
		n.mu.Lock()
		if ok {
			next = n.renewedAt + n.opts.RenewEvery
		} else {
			next = n.opts.Clock.BootTime() + n.opts.RenewEvery/4
		}
		n.mu.Unlock()
	}
}

// renew bumps the heartbeat with If-Match and reports whether it did. A 412
// is read back before it counts: a retried PUT that landed answers 412 too.
func (n *Node) renew(ctx context.Context) bool {
	n.mu.Lock()
	next := Lease{Node: n.id, Address: n.address, Heartbeat: n.heartbeat + 1, Peer: n.opts.PeerAddress, Follower: n.opts.Follower}
	etag := n.etag
	n.mu.Unlock()
	key := frames.NodeKey(n.id)
	body := next.Marshal()
	start := n.opts.Clock.BootTime()
	info, err := n.b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: etag})
	if err == nil {
		n.mu.Lock()
		n.heartbeat, n.etag, n.renewedAt = next.Heartbeat, info.ETag, start
		n.mu.Unlock()
		return true
	}
	if !errors.Is(err, bucket.ErrPrecondition) {
		n.log.Warn("lease renewal failed", logattr.Err, err)
		return false // retried soon; Valid turns false after Lease
	}
	cur, curInfo, rerr := ReadLease(ctx, n.b, n.id)
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case errors.Is(rerr, bucket.ErrNotFound):
		// Swept (SweepLeases) or deleted by hand: peers count this node
		// as gone, so it must not act as live again.
		n.stopLocked(fmt.Errorf("%w: lease %s was deleted", ErrLeaseLost, key))
	case rerr != nil:
		n.log.Warn("lease renewal: reading back after 412", logattr.Err, rerr)
	case cur.Fenced:
		n.stopLocked(ErrFenced)
	case cur.Heartbeat == next.Heartbeat && cur.Address == n.address:
		// Our PUT landed, its answer was lost: adopt it. Its start time
		// is not known for sure, so renewedAt stays where it was.
		n.heartbeat, n.etag = cur.Heartbeat, curInfo.ETag
	default:
		n.stopLocked(fmt.Errorf("%w: lease %s changed by someone else (heartbeat %d)", ErrFenced, key, cur.Heartbeat))
	}
	return false
}

// Close stops renewing and deregisters (deletes the lease). Call it after
// releasing every actor the node holds.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	wasLive := n.err == nil
	n.stopLocked(ErrClosed)
	n.mu.Unlock()
	if n.stopRenew != nil {
		n.stopRenew()
		<-n.renewDone
	}
	if !wasLive {
		return nil // fenced or lost: the lease is the peers' evidence now
	}
	if err := n.b.Delete(ctx, frames.NodeKey(n.id)); err != nil {
		return fmt.Errorf("fence: deregistering node %s: %w", n.id, err)
	}
	n.log.Info("node deregistered")
	return nil
}
