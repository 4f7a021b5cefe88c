package chunks

import (
	"context"
	"fmt"
	"sync"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// Loading on first touch: a compaction that applies a few pages to a large
// database needs only the chunks those pages fall in. OpenLazy makes a
// lanes.Set at a manifest's state without fetching any chunk (a lazy Set,
// see lanes.NewLazySet); before each frame is applied, Touch fetches the
// chunks it touches, each verified as Load verifies it, and fills them in.
// Write, given the manifest as Options.Prior, then names every chunk the
// frames did not touch unread (its fingerprint is the manifest's) and
// reads, hashes and uploads the others, so the manifest it writes is the
// one a Set loaded whole would give.

// OpenLazy returns a lazy lanes.Set in dir at the state of manifest m,
// read at key, fetching nothing. It refuses a manifest whose chunks Write
// would not cut the same way (chunks of other than frames.
// DefaultChunkPages pages) and one lanes.NewLazySet cannot use: both match
// lanes.ErrNotLazy, and Load is the way to read such a manifest.
func OpenLazy(key string, m *frames.Manifest, dir string) (*lanes.Set, error) {
	for _, l := range m.Lanes {
		if want := frames.DefaultChunkPages(l.PageSize); l.ChunkPages != want {
			return nil, &Error{Op: "load", Manifest: key, Err: fmt.Errorf("%w: lane %d has chunks of %d pages, Write cuts %d",
				lanes.ErrNotLazy, l.Lane, l.ChunkPages, want)}
		}
	}
	set, err := lanes.NewLazySet(dir, m, key)
	if err != nil {
		return nil, &Error{Op: "load", Manifest: key, Err: err}
	}
	return set, nil
}

// Touch fetches the chunks of m (read at key) that applying frame f to
// set would touch and set does not hold yet (set.Needs), in parallel
// within Options.MaxInflightBytes, each read to its sealed end and
// checked against its key's hash and its reference's size
// (frames.ReadChunkSealed) as Load checks it, and fills them into set
// (lanes.Set.Fill, which checks their pages against the fingerprint). set
// must be OpenLazy's from m. Errors name the manifest and the chunk, as
// Load's; after one, set may hold some of the chunks, never a wrong one.
func Touch(ctx context.Context, b bucket.Bucket, a frames.Actor, key string, m *frames.Manifest, set *lanes.Set, f *frames.Frame, opts Options) (Loaded, error) {
	ids := set.Needs(f)
	if len(ids) == 0 {
		return Loaded{}, nil
	}
	opts = opts.withDefaults()
	jobs := make([]*touchJob, 0, len(ids))
	var perWorker int64
	for _, id := range ids {
		l := laneOf(m, id.Lane)
		if l == nil || id.Index >= len(l.Chunks) {
			// Needs names only chunks of the manifest the Set came from.
			return Loaded{}, &Error{Op: "load", Manifest: key, Err: fmt.Errorf("%w: the set needs chunk %d of lane %d, which the manifest does not have",
				lanes.ErrNotLoaded, id.Index, id.Lane)}
		}
		c := l.Chunks[id.Index]
		jobs = append(jobs, &touchJob{id: id, use: loadUse{hash: c.Hash, size: uint64(c.Pages) * uint64(l.PageSize)}})
		perWorker = max(perWorker, readerBytes(int64(l.ChunkPages)*int64(l.PageSize)))
	}
	ldr := &loader{b: b, a: a, key: key, lim: opts.Limits, hash: opts.HashContent}
	var mu sync.Mutex // a Set is not safe for concurrent use
	err := ldr.runEach(ctx, jobs, opts.workers(perWorker, len(jobs)), func(j *touchJob, content []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return set.Fill(j.id, content)
	})
	return ldr.stats(), err
}

// touchJob is one chunk Touch fetches.
type touchJob struct {
	id  lanes.ChunkID
	use loadUse
}

func laneOf(m *frames.Manifest, lane uint32) *frames.ManifestLane {
	for i := range m.Lanes {
		if m.Lanes[i].Lane == lane {
			return &m.Lanes[i]
		}
	}
	return nil
}
