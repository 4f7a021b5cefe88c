package quorum

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// AddrSetter is the part of the transport a Directory fills in: where a
// follower listens (peer.Node.SetAddr).
type AddrSetter interface {
	SetAddr(id follow.FollowerID, addr string) error
}

// Leases is the Directory of a cluster whose nodes register in the bucket
// (package fence). A follower is named by its store (fence.Lease.Follower,
// tails.Store.ID), not by the node serving it: a process restarted on the
// same store registers a new node, and is still the follower that holds
// what it acknowledged. The candidates are the followers of the leases
// alive on this node's observer that give a peer address
// (fence.Lease.Peer); the set is recorded in own.json with a write
// conditional on the claim (fence.Node.RecordFollowers).
type Leases struct {
	tr AddrSetter

	mu     sync.Mutex
	node   *fence.Node
	cached []fence.Lease // live, with a follower and a peer address
	at     time.Time
}

// CandidatesCache is how long a listing of the live nodes serves
// Candidates and Locate: every open asks. A third of fence.DefaultLease,
// so a node that died is offered for hardly longer than its lease still
// looks alive anyway (and follow copes with a follower that never answers).
const CandidatesCache = 3 * time.Second

var _ Directory = (*Leases)(nil)

// NewLeases returns the directory of node's cluster, filling in tr.
func NewLeases(node *fence.Node, tr AddrSetter) *Leases { return &Leases{node: node, tr: tr} }

// SetNode makes the directory use node (a host registers a new node after
// losing its lease).
func (d *Leases) SetNode(node *fence.Node) {
	d.mu.Lock()
	d.node, d.cached = node, nil
	d.mu.Unlock()
}

// live returns the live leases that name a follower and a peer address,
// from the cache unless refresh or it is older than CandidatesCache.
func (d *Leases) live(ctx context.Context, refresh bool) ([]fence.Lease, error) {
	d.mu.Lock()
	node := d.node
	if d.cached != nil && !refresh && time.Since(d.at) < CandidatesCache {
		out := d.cached
		d.mu.Unlock()
		return out, nil
	}
	d.mu.Unlock()
	leases, err := node.Observer.LiveNodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []fence.Lease
	for _, l := range leases {
		if l.Follower != "" && l.Peer != "" {
			out = append(out, l)
		}
	}
	d.mu.Lock()
	d.cached, d.at = out, time.Now()
	d.mu.Unlock()
	return out, nil
}

// Candidates returns the followers of the live nodes other than this one,
// sorted by node ID, and makes each reachable.
func (d *Leases) Candidates(ctx context.Context) ([]follow.FollowerID, error) {
	leases, err := d.live(ctx, false)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	self := d.node.ID()
	d.mu.Unlock()
	out := []follow.FollowerID{}
	for _, l := range leases {
		id := follow.FollowerID(l.Follower)
		if l.Node == self || slices.Contains(out, id) {
			continue
		}
		if err := d.tr.SetAddr(id, serving(leases, id).Peer); err != nil {
			continue
		}
		out = append(out, id)
	}
	return out, nil
}

// serving is the lease of the process serving follower id, of the live
// leases that name it; nil if none does. Two name it only for a moment: a
// process restarted on the store fences its predecessors' leases once it
// registered (fence.Node.RetirePredecessors). In that moment the one with
// the fewer renewals is the newer process.
func serving(leases []fence.Lease, id follow.FollowerID) *fence.Lease {
	var best *fence.Lease
	for i, l := range leases {
		if follow.FollowerID(l.Follower) == id && (best == nil || l.Heartbeat < best.Heartbeat) {
			best = &leases[i]
		}
	}
	return best
}

// LocateFresh is how old a listing Locate may use. A takeover locates the
// followers own.json names, and one of them may have restarted on its
// store since the listing (a new node at a new port): an address from a
// listing CandidatesCache old sent the takeover's fences to a dead port,
// and the takeover waited out follow.DefaultWait for an answer that could
// not come (seen in TestPeersCrashTakeover: 21 of 66 rounds took 12–22 s).
// The takeovers of one open share one listing.
const LocateFresh = 500 * time.Millisecond

// Locate finds the live node serving follower id and gives the transport
// its peer address; none is an error (the follower is unreachable until a
// node serves its store again).
func (d *Leases) Locate(ctx context.Context, id follow.FollowerID) error {
	d.mu.Lock()
	stale := time.Since(d.at) >= LocateFresh
	d.mu.Unlock()
	leases, err := d.live(ctx, stale)
	if err != nil {
		return err
	}
	best := serving(leases, id)
	if best == nil {
		return fmt.Errorf("quorum: no live node serves follower %s", id)
	}
	return d.tr.SetAddr(id, best.Peer)
}

// Claimed reads own.json's epoch (Directory.Claimed).
func (d *Leases) Claimed(ctx context.Context, a frames.Actor) (frames.Epoch, error) {
	d.mu.Lock()
	node := d.node
	d.mu.Unlock()
	r, _, err := fence.ReadRecord(ctx, node.Bucket(), a)
	return r.Epoch, err
}

// Record writes the set into own.json (fence.Node.RecordFollowers).
func (d *Leases) Record(ctx context.Context, own fence.Ownership, set []follow.FollowerID, q int) (fence.Ownership, error) {
	ids := make([]string, len(set))
	for i, id := range set {
		ids[i] = string(id)
	}
	d.mu.Lock()
	node := d.node
	d.mu.Unlock()
	return node.RecordFollowers(ctx, own, ids, q)
}
