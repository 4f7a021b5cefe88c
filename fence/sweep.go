package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// SweepLeases deletes the leases of nodes that are long gone: every node
// that crashed or was fenced leaves nodes/<node>.json behind (node IDs are
// random per start, so nothing ever reuses it). A lease goes when the
// bucket last wrote it more than olderThan ago, by the bucket's modification
// time against now.
//
// That is a wall-clock comparison, unlike liveness judgements, so olderThan
// must dwarf any clock skew and every lease: an hour or more. Deleting a
// lease that was in fact still renewed only ends that node (its next
// renewal finds no lease and it loses it), and a record naming a node
// without a lease counts as gone to claimants: never two owners.
// Unparseable leases are left for an operator and reported in the error.
func SweepLeases(ctx context.Context, b bucket.Bucket, olderThan time.Duration, now time.Time) (deleted []string, err error) {
	if olderThan <= 0 {
		return nil, errors.New("fence: SweepLeases needs a positive age")
	}
	var bad []error
	var stale []string
	for info, lerr := range bucket.All(ctx, b, frames.NodesPrefix) {
		if lerr != nil {
			return nil, fmt.Errorf("fence: listing %s: %w", frames.NodesPrefix, lerr)
		}
		k, perr := frames.ParseKey(info.Key)
		if perr != nil || k.Kind != frames.KeyNode {
			bad = append(bad, fmt.Errorf("%w %s: not a lease key", ErrBadLease, info.Key))
			continue
		}
		if info.ModTime.IsZero() || now.Sub(info.ModTime) < olderThan {
			continue
		}
		stale = append(stale, info.Key)
	}
	if len(stale) > 0 {
		if derr := b.DeleteMany(ctx, stale); derr != nil {
			return nil, fmt.Errorf("fence: deleting stale leases: %w", derr)
		}
	}
	return stale, errors.Join(bad...)
}
