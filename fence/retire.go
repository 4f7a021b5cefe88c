package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// RetirePredecessors marks fenced every other lease that names this node's
// follower (Options.Follower) and is not fenced yet, and returns the nodes
// it fenced. Call it only while holding the follower store's lock (package
// tails takes it at Open): then every other process that served the store
// has ended, and a lease one of them left behind (a crash leaves its lease
// in the bucket) is a dead process's.
//
// Why: until an observer has watched such a lease for Lease+Grace it looks
// alive (Observer.Judge), so a node that started since, or that was not
// watching, could find two live leases naming the follower, and send the
// store's messages to the dead one's port (a takeover then waited its
// whole bound for a follower that was up all along). Fenced, it is dead at
// once to every observer, and the actors its node held are claimable at
// once, which is right: that process is gone.
//
// A lease that changed under the write (a renewal: impossible for a dead
// process, so someone else's mistake) is left alone, and so is one that
// cannot be read as a lease; both are reported in the error, with the
// nodes that were fenced returned beside it.
func (n *Node) RetirePredecessors(ctx context.Context) ([]string, error) {
	if n.opts.Follower == "" {
		return nil, nil
	}
	var fenced []string
	var errs []error
	for info, err := range bucket.All(ctx, n.b, frames.NodesPrefix) {
		if err != nil {
			return fenced, fmt.Errorf("fence: listing %s: %w", frames.NodesPrefix, err)
		}
		k, err := frames.ParseKey(info.Key)
		if err != nil || k.Kind != frames.KeyNode || k.Node == n.id {
			continue
		}
		l, li, err := ReadLease(ctx, n.b, k.Node)
		switch {
		case errors.Is(err, bucket.ErrNotFound):
			continue // deleted since the listing
		case err != nil:
			errs = append(errs, err)
			continue
		case l.Follower != n.opts.Follower || l.Fenced:
			continue
		}
		l.Fenced = true
		body := l.Marshal()
		_, err = n.b.Put(ctx, info.Key, bytes.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: li.ETag})
		switch {
		case err == nil:
			fenced = append(fenced, l.Node)
			n.log.Warn("fenced a predecessor on this node's follower store", "predecessor", l.Node, logattr.Follower, l.Follower, "heartbeat", l.Heartbeat)
		case errors.Is(err, bucket.ErrNotFound):
		default:
			errs = append(errs, fmt.Errorf("fence: fencing %s, a predecessor on follower %s: %w", info.Key, l.Follower, err))
		}
	}
	return fenced, errors.Join(errs...)
}
