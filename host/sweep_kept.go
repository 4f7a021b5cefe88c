package host

import (
	"context"
	"fmt"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// sweptKept is what a host's sweeps remember between them: the stale
// leases the last complete sweep kept, because an own.json named their
// node. A sweep with a stale lease to judge reads every own.json in the
// bucket (fence.SweepLeases), and a node that died holding an actor
// nobody has claimed since leaves such a lease for as long as that
// actor stays untouched, so every sweep of every node would read the
// own.json of every actor of the cluster. Used by the sweep's goroutine
// only.
type sweptKept struct {
	keys map[string]struct{} // nil: no complete sweep yet
}

// sweep runs one sweep of b's leases at now, unless every stale lease is
// one the last complete sweep kept: one listing of the leases then, and
// the own.json of no actor. A lease that turns stale since (a node that
// died or was fenced more than olderThan ago) makes the sweep a full one
// again, which also deletes what became unnamed meanwhile. A kept lease that an
// own.json no longer names (its actor was claimed since) waits for that
// sweep: a leftover lease is a few bytes, and no claimant is slower for
// it.
func sweep(ctx context.Context, b bucket.Bucket, kept *sweptKept, olderThan time.Duration, now time.Time) ([]string, error) {
	stale, unparsed, err := staleLeases(ctx, b, olderThan, now)
	if err != nil {
		return nil, err
	}
	if !unparsed && kept.keys != nil && subset(stale, kept.keys) {
		return nil, nil
	}
	deleted, err := fence.SweepLeases(ctx, b, olderThan, now)
	if err != nil {
		kept.keys = nil
		return deleted, err
	}
	kept.keys = stale
	for _, k := range deleted {
		delete(kept.keys, k)
	}
	return deleted, nil
}

// staleLeases lists the lease keys that fence.SweepLeases would judge at
// now, and whether some key under the leases' prefix does not parse
// (SweepLeases reports it; it is left to it).
func staleLeases(ctx context.Context, b bucket.Bucket, olderThan time.Duration, now time.Time) (map[string]struct{}, bool, error) {
	stale := map[string]struct{}{}
	unparsed := false
	for info, err := range bucket.All(ctx, b, frames.NodesPrefix) {
		if err != nil {
			return nil, false, fmt.Errorf("host: listing %s: %w", frames.NodesPrefix, err)
		}
		if k, err := frames.ParseKey(info.Key); err != nil || k.Kind != frames.KeyNode {
			unparsed = true
			continue
		}
		if !info.ModTime.IsZero() && now.Sub(info.ModTime) >= olderThan {
			stale[info.Key] = struct{}{}
		}
	}
	return stale, unparsed, nil
}

func subset(s, of map[string]struct{}) bool {
	for k := range s {
		if _, ok := of[k]; !ok {
			return false
		}
	}
	return true
}
