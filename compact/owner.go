package compact

// What the owner of a session remembers across its passes (Options.Owner).
//
// A hot database rewritten at random changes about every chunk between two
// snapshots, so each pass of its owner replaces every chunk the previous
// manifest named. Under the grace alone those chunks would stay an hour
// after the manifest naming them went: on the hot 1.1 MiB database of
// BENCHMARKS.md ("Storage after an hour"), 143 times the database on
// average. And with a retention window, every pass read every retained
// manifest again to learn which chunks they name.
//
// The owner knows more than any other collector:
//
//   - which chunks it put itself in this session (Owner.uploads);
//   - every manifest it wrote, even one a listing does not show yet;
//   - that it writes its session's snapshots one pass at a time, and that
//     nobody else writes one while it holds the session (see below).
//
// So an owner's pass collects a chunk it put itself as soon as no snapshot
// it listed, and no manifest it wrote and has not deleted, names it: the
// only manifests that could name such a chunk and that the pass cannot
// see are ones in flight, and the owner has none in flight while its pass
// runs. Rule 3 of collect.go therefore does not apply to them (rule 5): no
// grace, no Stat, one DeleteMany for all of them (deleteOwned). Chunks
// others put keep rule 3, the grace and a Stat showing each unchanged just
// before its delete. Rule 2 holds as for any pass: own.json, read again
// before the first delete, must still name the epoch the pass started
// from, or nothing is collected.
//
// Nobody else writes a snapshot into a session that may still be live
// (Options.Live): a pass that is not the owner's writes none into a
// session own.json says is held, or released without its end recorded
// (a writer without a node, which records its end only when it closes).
// Such a pass would take the owner's newest manifest as its base and name
// its chunks without putting them again, and the owner, not knowing of the
// manifest in flight, may have collected them by the time it lands.
//
// Manifests are read once per owner: the manifests the owner wrote and
// those its passes read (retained ones, older sessions' for the lineage)
// are kept by key, as a manifest's key names its session and sequence
// number and its chunks are named by content, so two writers of one key
// write the same manifest. What is kept is bounded (maxOwnerRefs chunk
// references, about 28 MiB); past the bound a pass reads from the bucket
// what it cannot keep, and collects by the grace alone.

import (
	"context"
	"sync"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// maxOwnerRefs bounds the chunk references an Owner keeps, over every
// manifest it holds (a reference is about 56 bytes in memory).
const maxOwnerRefs = 1 << 19

// Owner is what the owner of one session keeps across its passes: the
// chunks it put and the manifests it wrote or read. Give the same Owner to
// every pass of the session (Options.Owner), and tell it about manifests
// written outside a pass (Wrote). Safe for concurrent use.
type Owner struct {
	epoch frames.Epoch

	mu        sync.Mutex
	uploads   map[frames.ChunkHash]bool // put by the owner in this session
	manifests map[string]*heldManifest  // by snapshot key
	refs      int                       // chunk references in manifests
	overflow  bool                      // the bound was hit: the owner shortcut is off
}

// heldManifest is a manifest the owner knows by key.
type heldManifest struct {
	m *frames.Manifest
	// written: the owner wrote it and has not deleted it, so it may be in
	// the bucket whatever a listing shows. listed: a listing showed it.
	written, listed bool
}

// NewOwner returns the Owner of the session of epoch.
func NewOwner(epoch frames.Epoch) *Owner {
	return &Owner{epoch: epoch, uploads: map[frames.ChunkHash]bool{}, manifests: map[string]*heldManifest{}}
}

// Wrote records a manifest the owner stored at key, with the chunks it put
// for it: the session's first snapshot (told by the writer) and each
// manifest an owner's pass writes (told by the pass).
func (o *Owner) Wrote(key string, m *frames.Manifest, put []frames.ChunkHash) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range put {
		o.uploads[h] = true
	}
	o.holdLocked(key, m, true)
}

// holdLocked keeps m under key, unless that would pass the bound.
func (o *Owner) holdLocked(key string, m *frames.Manifest, written bool) {
	if m == nil {
		return
	}
	if h, ok := o.manifests[key]; ok {
		h.written = h.written || written
		return
	}
	n := refsOf(m)
	if o.refs+n > maxOwnerRefs {
		// A manifest the owner wrote and cannot remember might name a
		// chunk the owner would take as unnamed: no shortcut from now on.
		o.overflow = o.overflow || written
		return
	}
	o.manifests[key] = &heldManifest{m: m, written: written}
	o.refs += n
}

func refsOf(m *frames.Manifest) int {
	n := 0
	for _, l := range m.Lanes {
		n += len(l.Chunks)
	}
	return n
}

// ownerOf returns the Owner of opts when the pass is its owner's: own.json
// (as the pass read it, before its listing) names the Owner's epoch.
func ownerOf(opts Options, own *fence.Record) *Owner {
	if opts.Owner == nil || own == nil || own.Epoch != opts.Owner.epoch {
		return nil
	}
	return opts.Owner
}

// mayBeLive reports whether the session own.json names may still have a
// writer: it is held, or released without its end recorded (a writer
// without a node records it only when it closes).
func mayBeLive(own *fence.Record) bool {
	return own != nil && (!own.Released() || own.Seq == 0)
}

// listed brings the Owner up to a pass's listing: chunks no longer listed
// are no longer the owner's to collect (someone deleted them), manifests
// it read that are no longer listed are forgotten, and manifests it wrote
// that a listing showed once and shows no more were deleted by another
// pass.
func (o *Owner) listed(inv *restore.Inventory) {
	chunks := make(map[frames.ChunkHash]bool, len(inv.Chunks))
	for _, c := range inv.Chunks {
		chunks[c.Hash] = true
	}
	snaps := map[string]bool{}
	for i := range inv.Sessions {
		for _, s := range inv.Sessions[i].Snapshots {
			snaps[s.Key] = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for h := range o.uploads {
		if !chunks[h] {
			delete(o.uploads, h)
		}
	}
	for key, h := range o.manifests {
		switch {
		case snaps[key]:
			h.listed = true
		case !h.written || h.listed:
			o.forgetLocked(key)
		}
	}
}

// deleted forgets the manifests a pass deleted.
func (o *Owner) deleted(keys []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range keys {
		o.forgetLocked(k)
	}
}

func (o *Owner) forgetLocked(key string) {
	if h, ok := o.manifests[key]; ok {
		o.refs -= refsOf(h.m)
		delete(o.manifests, key)
	}
}

// collectable reports whether the owner may collect chunk h without the
// grace once no manifest names it: it put it itself in this session.
func (o *Owner) collectable(h frames.ChunkHash) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.overflow && o.uploads[h]
}

// collected forgets the chunks an owner's pass meant to delete.
func (o *Owner) collected(cs []restore.Chunk) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range cs {
		delete(o.uploads, c.Hash)
	}
}

// unlisted adds to named the chunks of the manifests the owner wrote and
// has not seen listed: they may be in the bucket although the listing
// does not show them.
func (o *Owner) unlisted(named chunkSet) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range o.manifests {
		if h.written && !h.listed {
			named.add(h.m)
		}
	}
}

// manifest returns the manifest held under key, if any.
func (o *Owner) manifest(key string) (*frames.Manifest, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.manifests[key]
	if !ok {
		return nil, false
	}
	return h.m, true
}

// read reads the snapshot at key as readManifest does, through what the
// owner holds; a manifest read from the bucket is held. A nil Owner reads
// the bucket.
func (o *Owner) read(ctx context.Context, b bucket.Bucket, key string, lim frames.Limits, n *int64) (*frames.Manifest, error) {
	if o == nil {
		return readManifest(ctx, b, key, lim, n)
	}
	if m, ok := o.manifest(key); ok {
		return m, nil
	}
	m, err := readManifest(ctx, b, key, lim, n)
	if err == nil && m != nil {
		o.mu.Lock()
		o.holdLocked(key, m, false)
		o.mu.Unlock()
	}
	return m, err
}

// snapshotHeader is the package's snapshotHeader through what the owner
// holds; a manifest read is held. A nil Owner reads the bucket.
func (o *Owner) snapshotHeader(ctx context.Context, b bucket.Bucket, a frames.Actor, key string, lim frames.Limits, n *int64) (frames.Snapshot, *frames.Manifest, error) {
	if o == nil {
		return snapshotHeader(ctx, b, a, key, lim, n)
	}
	if m, ok := o.manifest(key); ok {
		return m.Header(), m, nil
	}
	hdr, m, err := snapshotHeader(ctx, b, a, key, lim, n)
	if err == nil && m != nil {
		o.mu.Lock()
		o.holdLocked(key, m, false)
		o.mu.Unlock()
	}
	return hdr, m, err
}
