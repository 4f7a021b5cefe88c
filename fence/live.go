package fence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// MaxLiveNodes bounds the leases LiveNodes reads: a bucket with more under
// nodes/ is an error (SweepLeases deletes the leases of long-gone nodes).
const MaxLiveNodes = 10_000

// LiveNodes lists the leases under nodes/ and returns those of the nodes
// this observer judges Alive (Judge: the same rules a claim follows),
// sorted by node ID, for an owner choosing followers (Lease.Peer says
// where each serves the follower transport; the observer's own node is
// among them). It reads at most MaxLiveNodes leases, paging the listing,
// and fails if there are more.
//
// A node this observer has not watched for Lease+Grace is Alive from its
// first sighting (see Judge), so a freshly started observer lists a node
// that died with its lease left behind too: a follower chosen from the
// list may still turn out unreachable, and the follower protocol replaces
// it like any other. A key under nodes/ that is not a lease key, or a lease
// that does not parse, names no candidate: LiveNodes returns the live nodes
// it found with an error matching ErrBadLease that names each such key.
// Any other failure to list or read is an error alone.
func (o *Observer) LiveNodes(ctx context.Context) ([]Lease, error) {
	return o.liveNodes(ctx, MaxLiveNodes)
}

// liveNodes is LiveNodes reading at most limit leases.
func (o *Observer) liveNodes(ctx context.Context, limit int) ([]Lease, error) {
	var live []Lease
	var bad []error
	read := 0
	for info, err := range bucket.All(ctx, o.b, frames.NodesPrefix) {
		if err != nil {
			return nil, fmt.Errorf("fence: listing %s: %w", frames.NodesPrefix, err)
		}
		k, err := frames.ParseKey(info.Key)
		if err != nil || k.Kind != frames.KeyNode {
			bad = append(bad, badLease(info.Key, "not a lease key"))
			continue
		}
		if read++; read > limit {
			return nil, fmt.Errorf("fence: listing %s: more than %d leases (SweepLeases deletes the stale ones)", frames.NodesPrefix, limit)
		}
		l, lease, err := o.Judge(ctx, k.Node)
		switch {
		case errors.Is(err, ErrBadLease):
			bad = append(bad, err)
		case err != nil:
			return nil, fmt.Errorf("fence: judging node %s: %w", k.Node, err)
		case l == Alive:
			live = append(live, lease)
		}
	}
	slices.SortFunc(live, func(a, b Lease) int { return strings.Compare(a.Node, b.Node) })
	return live, errors.Join(bad...)
}
