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
// time against now, and no own.json names its node as holder.
//
// That is a wall-clock comparison, unlike liveness judgements, so olderThan
// must dwarf any clock skew and every lease: an hour or more. The lease of
// a holder is kept whatever its age: it is the evidence claimants judge
// (an expired heartbeat is fenced and claimed; a missing lease must be
// waited out for Lease+Grace), and deleting it under a holder that is in
// fact alive would end that holder. A claim that lands between the
// listing of own.json and the deletion can still lose its holder's lease;
// that only ends the holder (its next renewal finds no lease) and delays
// its claimants: they wait out the absence, never two owners.
//
// Unparseable leases are left for an operator and reported in the error.
// An own.json that cannot be read or parsed might name any node, so then
// nothing is deleted: the error (matching ErrBadRecord for a damaged one)
// names it.
func SweepLeases(ctx context.Context, b bucket.Bucket, olderThan time.Duration, now time.Time) (deleted []string, err error) {
	if olderThan <= 0 {
		return nil, errors.New("fence: SweepLeases needs a positive age")
	}
	var bad []error
	var stale []frames.Key
	for info, lerr := range bucket.All(ctx, b, frames.NodesPrefix) {
		if lerr != nil {
			return nil, fmt.Errorf("fence: listing %s: %w", frames.NodesPrefix, lerr)
		}
		k, perr := frames.ParseKey(info.Key)
		if perr != nil || k.Kind != frames.KeyNode {
			bad = append(bad, badLease(info.Key, "not a lease key"))
			continue
		}
		if info.ModTime.IsZero() || now.Sub(info.ModTime) < olderThan {
			continue
		}
		stale = append(stale, k)
	}
	if len(stale) == 0 {
		return nil, errors.Join(bad...)
	}
	held, err := holders(ctx, b, 0)
	if err != nil {
		return nil, errors.Join(append(bad, err)...)
	}
	var keys []string
	for _, k := range stale {
		if !held[k.Node] {
			keys = append(keys, k.String())
		}
	}
	if len(keys) > 0 {
		if derr := b.DeleteMany(ctx, keys); derr != nil {
			return nil, fmt.Errorf("fence: deleting stale leases: %w", derr)
		}
	}
	return keys, errors.Join(bad...)
}

// holders returns the nodes that some own.json names as holder. It reads
// every own.json under do/, and fails if any cannot be read or parsed.
//
// A listing of do/ is also a listing of every chunk, batch and snapshot, so
// it skips what it does not need: an actor's keys sort chunk/, log/,
// own.json, snapshot/ (go doc ./frames, "Object keys"), so a page that ends
// inside an actor's chunks resumes at its log, one that ends inside its log
// resumes at its own.json, and one that ends at or past its own.json
// resumes at the next actor. "~" sorts after every character a key
// element may hold. pageSize is the listing's (0: the bucket's default).
func holders(ctx context.Context, b bucket.Bucket, pageSize int) (map[string]bool, error) {
	const prefix = "do/"
	held := map[string]bool{}
	var errs []error
	after := ""
	for {
		page, err := b.List(ctx, prefix, after, pageSize)
		if err != nil {
			return nil, fmt.Errorf("fence: listing %s: %w", prefix, err)
		}
		for _, info := range page.Objects {
			k, err := frames.ParseKey(info.Key)
			if err != nil || k.Kind != frames.KeyOwn {
				continue // not an own.json: no claim ever reads it
			}
			rec, _, err := ReadRecord(ctx, b, k.ActorOf())
			switch {
			case errors.Is(err, bucket.ErrNotFound):
				continue // deleted since the listing: names nobody
			case errors.Is(err, ErrBadRecord):
				errs = append(errs, err)
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("fence: reading %s: %w", info.Key, err))
				continue
			}
			if !rec.Released() {
				held[rec.Node] = true
			}
		}
		if !page.More || len(page.Objects) == 0 {
			break
		}
		last := page.Objects[len(page.Objects)-1].Key
		after = last
		if k, err := frames.ParseKey(last); err == nil {
			a := k.ActorOf()
			switch k.Kind {
			case frames.KeyChunk:
				after = a.ChunkPrefix() + "~"
			case frames.KeyLog:
				after = a.LogPrefix() + "~"
			default:
				after = a.Prefix() + "~"
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("fence: not sweeping leases: %w", errors.Join(errs...))
	}
	return held, nil
}
