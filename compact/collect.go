package compact

// Collecting chunks: the last step of a pass deletes the chunk objects that
// no manifest the pass listed names and that are older than the grace
// (Options.Grace, DefaultGrace). What a chunk is safe from, and why, is in
// the package documentation ("Collecting chunks"); the rules it rests on are
// these, each enforced here:
//
//  1. References are those of every snapshot in the pass's own listing,
//     including the ones the pass has just deleted: a chunk is collected
//     only by a pass whose listing shows no manifest naming it, so chunks
//     of a manifest deleted by this pass wait for a later pass.
//  2. Nothing is collected while the current session has no snapshot
//     (pass returns before it gets here: a claim is restoring, and its
//     first manifest will name chunks of the manifest it read), nor when
//     own.json, read again just before the first delete, no longer names
//     the epoch the pass started from (a claim began during the pass).
//  3. A chunk goes only if its modification time, as listed, is at least
//     the grace before the time taken before the listing, and if a Stat just
//     before its delete still shows that object (same modification time and
//     ETag): a chunk uploaded again since the listing, for a manifest in
//     flight, stays.
//  4. A snapshot the collector cannot read (vanished since the listing, or
//     damaged) might name any chunk: then nothing is collected.
//  5. In an owner's pass (Options.Owner, owner.go), a chunk the owner put
//     itself is exempt from rule 3: no grace, no Stat, one DeleteMany for
//     all of them; and the manifests the owner wrote count as references
//     even before a listing shows them.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/internal/workers"
	"github.com/framectl/framectl/restore"
)

// DefaultGrace is how old an unreferenced chunk must be before a pass
// deletes it (Options.Grace). The grace is what protects the chunks a
// manifest's writer has uploaded before the manifest itself lands, so it
// must exceed the longest such upload, plus the skew between the clock
// of the collector and that of the bucket, which stamps modification
// times. A compaction of a 1 GiB database uploads at most its 4,096
// chunks of 256 KiB before its manifest: seconds to a few minutes even on
// a slow link. Clock skew shifts the grace by as much; S3 refuses requests
// signed more than 15 minutes off its own clock (RequestTimeTooSkewed), so
// a collector it answers is at most that far off. An hour covers both, as
// the sweep of node leases asks of its age (fence.SweepLeases). The
// writer's own passes do not wait it out for the chunks they put
// (owner.go): on a database rewritten at random each pass replaces every
// chunk, and an hour of them is a hundred times the database.
const DefaultGrace = time.Hour

// collectWorkers is how many snapshots the collector reads, and chunks it
// checks and deletes, at once.
const collectWorkers = 8

// chunkSet is a set of chunk hashes.
type chunkSet map[frames.ChunkHash]bool

func (s chunkSet) add(ms ...*frames.Manifest) {
	for _, m := range ms {
		if m == nil {
			continue
		}
		for _, l := range m.Lanes {
			for _, c := range l.Chunks {
				s[c.Hash] = true
			}
		}
	}
}

// collection is what a pass knows about its chunks before it deletes
// anything: the chunks no snapshot it listed names.
type collection struct {
	unnamed []restore.Chunk
	skip    string // why nothing may be collected, if so
}

// references finds the chunks of inv that no snapshot of inv names. It
// runs before the pass deletes anything, so that it reads the snapshots
// the pass is about to delete too (rule 1). known holds manifests the pass
// has read already (the base of the size rule, the manifest it wrote),
// keyed by snapshot key, so that they are
// not read again; when they name every chunk listed, nothing else is read.
// (The manifest the pass wrote is among inv's snapshots, appended.)
//
// An owner's pass (owner non-nil) counts as named the chunks of the
// manifests the owner wrote that the listing does not show yet, and reads
// through what the owner holds (owner.go).
func references(ctx context.Context, b bucket.Bucket, owner *Owner, inv *restore.Inventory, known map[string]*frames.Manifest,
	opts Options, res *Result) (collection, error) {
	named := chunkSet{}
	for _, m := range known {
		named.add(m)
	}
	if owner != nil {
		owner.unlisted(named)
	}
	var unnamed []restore.Chunk
	for _, c := range inv.Chunks {
		if !named[c.Hash] {
			unnamed = append(unnamed, c)
		}
	}
	if len(unnamed) == 0 {
		return collection{}, nil
	}
	var todo []restore.Object
	for i := range inv.Sessions {
		for _, o := range inv.Sessions[i].Snapshots {
			if _, ok := known[o.Key]; !ok {
				todo = append(todo, o)
			}
		}
	}
	ms, skip, err := readManifests(ctx, b, owner, inv.Actor, todo, opts.Limits, &res.BytesRead)
	if err != nil || skip != "" {
		return collection{skip: skip}, err
	}
	named.add(ms...)
	var c collection
	for _, ch := range unnamed {
		if !named[ch.Hash] {
			c.unnamed = append(c.unnamed, ch)
		}
	}
	return c, nil
}

// collect deletes the chunks of c that were modified at least opts.Grace
// before listedAt (the time taken before the listing), and in an owner's
// pass the chunks of c the owner put itself whatever their age (owner.go),
// once the pass has deleted what it deletes. own is own.json as the pass
// read it before the listing (nil: absent).
func collect(ctx context.Context, b bucket.Bucket, a frames.Actor, c collection, owner *Owner, own *fence.Record,
	listedAt time.Time, opts Options, log *slog.Logger, res *Result) error {
	if c.skip != "" {
		res.CollectSkipped = c.skip
		log.Warn("collecting no chunks", logattr.Why, c.skip)
		return nil
	}
	// Rule 3: old enough, as listed.
	cutoff := listedAt.Add(-opts.Grace)
	var old, owned []restore.Chunk
	for _, ch := range c.unnamed {
		if owner != nil && owner.collectable(ch.Hash) {
			owned = append(owned, ch)
			continue
		}
		if ch.ModTime.IsZero() || ch.ModTime.After(cutoff) {
			// A zero time is a backend that did not say: not known to be
			// old, so kept.
			res.ChunksKeptByGrace++
			continue
		}
		old = append(old, ch)
	}
	if len(old) == 0 && len(owned) == 0 {
		return nil
	}
	// Rule 2: no claim began since own.json was read.
	now, err := readOwner(ctx, b, a)
	if err != nil {
		return err
	}
	if (now == nil) != (own == nil) || now != nil && now.Epoch != own.Epoch {
		res.CollectSkipped = "own.json changed during the pass (a claim began): its claimant may name any chunk"
		log.Info("collecting no chunks", logattr.Why, res.CollectSkipped)
		return nil
	}
	if len(owned) > 0 {
		if err := deleteOwned(ctx, b, a, owned, res); err != nil {
			return err
		}
		owner.collected(owned)
	}
	return deleteChunks(ctx, b, a, old, res)
}

// deleteOwned deletes chunks an owner put itself and no manifest names,
// in one request (rule 5). No Stat first: the only writer that could put
// one again for a manifest it has in flight is the owner, which has none
// in flight while its pass runs (a claimant shows in own.json, rule 2),
// since no one else writes snapshots of its session (Options.Live).
func deleteOwned(ctx context.Context, b bucket.Bucket, a frames.Actor, cs []restore.Chunk, res *Result) error {
	keys := make([]string, len(cs))
	var bytes int64
	for i, c := range cs {
		keys[i], bytes = c.Key, bytes+c.Size
	}
	if err := b.DeleteMany(ctx, keys); err != nil {
		return &Error{Op: "collect", Actor: a, Key: a.ChunkPrefix(), Err: err}
	}
	res.ChunksDeleted += len(cs)
	res.ChunkBytesDeleted += bytes
	res.ChunksOwned += len(cs)
	return nil
}

// readManifests reads the snapshots objs, returning the manifests among
// them. skip is why nothing may be collected, when one cannot be read.
func readManifests(ctx context.Context, b bucket.Bucket, owner *Owner, a frames.Actor, objs []restore.Object, lim frames.Limits, read *int64) ([]*frames.Manifest, string, error) {
	var (
		mu    sync.Mutex
		out   []*frames.Manifest
		skip  string
		bytes int64
	)
	err := workers.Run(ctx, objs, min(collectWorkers, len(objs)), func(ctx context.Context, _ *struct{}, o restore.Object) error {
		var n int64
		m, err := owner.read(ctx, b, o.Key, lim, &n)
		mu.Lock()
		defer mu.Unlock()
		bytes += n
		switch {
		case err == nil:
			if m != nil {
				out = append(out, m)
			}
		case errors.Is(err, bucket.ErrNotFound):
			if skip == "" {
				skip = fmt.Sprintf("%s vanished while the collector read it (another pass deleting it): the chunks it named are not known", o.Key)
			}
		case errors.Is(err, frames.ErrDamage):
			if skip == "" {
				skip = fmt.Sprintf("%s cannot be read (%v): the chunks it names are not known", o.Key, err)
			}
		default:
			return &Error{Op: "collect", Actor: a, Key: o.Key, Err: err}
		}
		return nil
	})
	*read += bytes
	var ce *Error
	switch {
	case errors.As(err, &ce):
		return nil, "", err // a read failed
	case err != nil:
		return nil, "", &Error{Op: "collect", Actor: a, Key: a.SnapshotPrefix(), Err: err}
	}
	return out, skip, nil
}

// readManifest reads the snapshot at key: its manifest, or nil for a full
// snapshot (which names no chunk; only its header is read).
func readManifest(ctx context.Context, b bucket.Bucket, key string, lim frames.Limits, read *int64) (*frames.Manifest, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	cr := iocount.NewReader(rc, nil)
	_, m, err := frames.OpenSnapshot(cr, key, lim)
	*read += cr.Count()
	return m, err
}

// deleteChunks deletes each chunk of cs that a Stat shows unchanged since
// the listing, one Stat and one delete at a time per worker, so that the
// time between the two stays one round trip.
func deleteChunks(ctx context.Context, b bucket.Bucket, a frames.Actor, cs []restore.Chunk, res *Result) error {
	if len(cs) == 0 {
		return nil
	}
	var mu sync.Mutex
	err := workers.Run(ctx, cs, min(collectWorkers, len(cs)), func(ctx context.Context, _ *struct{}, c restore.Chunk) error {
		outcome, err := deleteChunk(ctx, b, c)
		if err != nil {
			return &Error{Op: "collect", Actor: a, Key: c.Key, Err: err}
		}
		mu.Lock()
		defer mu.Unlock()
		switch outcome {
		case chunkDeleted:
			res.ChunksDeleted++
			res.ChunkBytesDeleted += c.Size
		case chunkChanged:
			res.ChunksKeptByGrace++ // uploaded again since the listing: young
		}
		return nil
	})
	var ce *Error
	if err != nil && !errors.As(err, &ce) {
		return &Error{Op: "collect", Actor: a, Key: a.ChunkPrefix(), Err: err}
	}
	return err
}

// What deleteChunk did.
const (
	chunkDeleted = iota
	chunkChanged // put again since the listing: kept
	chunkGone    // deleted already (another collector)
)

// deleteChunk deletes c if it is still the object listed.
func deleteChunk(ctx context.Context, b bucket.Bucket, c restore.Chunk) (int, error) {
	info, err := b.Stat(ctx, c.Key)
	if errors.Is(err, bucket.ErrNotFound) {
		return chunkGone, nil
	}
	if err != nil {
		return 0, err
	}
	// To the second: S3 lists modification times to the millisecond but
	// answers a HEAD to the second. An S3 ETag is the content's MD5, so a
	// chunk put again (same content) shows only in its time; one put again
	// within the second it was first written is not told apart, but the
	// chunks considered here are older than the grace.
	if !info.ModTime.Truncate(time.Second).Equal(c.ModTime.Truncate(time.Second)) || info.ETag != c.ETag {
		return chunkChanged, nil
	}
	if err := b.Delete(ctx, c.Key); err != nil {
		return 0, err
	}
	return chunkDeleted, nil
}
