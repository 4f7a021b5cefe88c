package chunks

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
	"github.com/framectl/framectl/internal/workers"
	"github.com/framectl/framectl/lanes"
)

// Loaded is what Load read.
type Loaded struct {
	Chunks int   // chunk objects read (once each, however many references name one)
	Bytes  int64 // their stored bytes
}

// Load builds a lanes.Set in dir from the manifest m read at key (a
// verified manifest: frames.ReadManifest or frames.OpenSnapshot), at
// m.Seq and m.CommitTime. Its chunks are fetched and decoded in parallel
// within Options.MaxInflightBytes, each read to its sealed end with the
// size its reference implies and its header's hash checked against the
// one its key names (frames.ReadChunkSealed), and written at its offset;
// then every lane's pages are checked against the manifest's checksum
// (lanes.Loader).
//
// A chunk that does not exist is ErrMissing; one that is damaged, or holds
// another chunk's content, matches the frames error that says so. Either
// way the *Error names the manifest and the chunk, and nothing is left in
// dir. A sealed chunk whose content is not what its own header says (a
// writer that lied) fails the manifest's checksum instead: that error
// names the manifest, and verify names the chunk. The Set is the
// manifest's state or there is none.
func Load(ctx context.Context, b bucket.Bucket, a frames.Actor, key string, m *frames.Manifest, dir string, opts Options) (*lanes.Set, Loaded, error) {
	opts = opts.withDefaults()
	ld, err := lanes.NewLoader(dir, m.Header(), key)
	if err != nil {
		return nil, Loaded{}, &Error{Op: "load", Manifest: key, Err: err}
	}
	// One job per chunk object: references to the same content (of the
	// same size) are written from one read.
	var jobs []*loadJob
	byUse := map[loadUse]*loadJob{}
	var perWorker int64
	for _, l := range m.Lanes {
		for _, c := range l.Chunks {
			u := loadUse{hash: c.Hash, size: uint64(c.Pages) * uint64(l.PageSize)}
			j := byUse[u]
			if j == nil {
				j = &loadJob{use: u}
				byUse[u] = j
				jobs = append(jobs, j)
			}
			j.at = append(j.at, pagesAt{lane: l.Lane, first: c.FirstPage})
		}
		perWorker = max(perWorker, readerBytes(int64(l.ChunkPages)*int64(l.PageSize)))
	}
	ldr := &loader{b: b, a: a, key: key, ld: ld, lim: opts.Limits, hash: opts.HashContent}
	if err := ldr.run(ctx, jobs, opts.workers(perWorker, len(jobs))); err != nil {
		ld.Abort()
		return nil, ldr.stats(), err
	}
	set, err := ld.Set()
	if err != nil {
		return nil, ldr.stats(), &Error{Op: "load", Manifest: key, Err: err}
	}
	return set, ldr.stats(), nil
}

// loadUse is a chunk object as references name it: its hash and the
// content size their pages give it.
type loadUse struct {
	hash frames.ChunkHash
	size uint64
}

// loadJob is one chunk object to fetch and every place its pages go.
type loadJob struct {
	use loadUse
	at  []pagesAt
}

// pagesAt is where a chunk's pages go: lane, from page first.
type pagesAt struct {
	lane  uint32
	first uint32
}

// loader is one Load's fetches.
type loader struct {
	b    bucket.Bucket
	a    frames.Actor
	key  string
	ld   *lanes.Loader
	lim  frames.Limits
	hash bool // Options.HashContent

	chunks atomic.Int64
	bytes  atomic.Int64
}

func (l *loader) stats() Loaded {
	return Loaded{Chunks: int(l.chunks.Load()), Bytes: l.bytes.Load()}
}

func (l *loader) run(ctx context.Context, jobs []*loadJob, n int) error {
	err := workers.Run(ctx, jobs, n, func(ctx context.Context, buf *[]byte, j *loadJob) error {
		return l.fetch(ctx, j, buf)
	})
	var ce *Error
	if err != nil && !errors.As(err, &ce) {
		return &Error{Op: "load", Manifest: l.key, Err: err}
	}
	return err
}

// fetch reads one chunk into buf (grown to hold it) and hands its pages
// to the Loader, at every place they go.
func (l *loader) fetch(ctx context.Context, j *loadJob, buf *[]byte) error {
	content, err := l.get(ctx, j.use, buf)
	if err != nil {
		return err
	}
	for _, at := range j.at {
		if err := l.ld.WritePages(at.lane, at.first, content); err != nil {
			return &Error{Op: "load", Manifest: l.key, Chunk: l.a.ChunkKey(j.use.hash), Err: err}
		}
	}
	return nil
}

// runEach fetches the chunk of every touch job on n workers and hands its
// content to fill, which must not keep it.
func (l *loader) runEach(ctx context.Context, jobs []*touchJob, n int, fill func(*touchJob, []byte) error) error {
	err := workers.Run(ctx, jobs, n, func(ctx context.Context, buf *[]byte, j *touchJob) error {
		content, err := l.get(ctx, j.use, buf)
		if err != nil {
			return err
		}
		if err := fill(j, content); err != nil {
			return &Error{Op: "load", Manifest: l.key, Chunk: l.a.ChunkKey(j.use.hash), Err: err}
		}
		return nil
	})
	var ce *Error
	if err != nil && !errors.As(err, &ce) {
		return &Error{Op: "load", Manifest: l.key, Err: err}
	}
	return err
}

// get reads one chunk object into buf (grown to hold it), verified, and
// returns its content.
func (l *loader) get(ctx context.Context, u loadUse, buf *[]byte) ([]byte, error) {
	key := l.a.ChunkKey(u.hash)
	fail := func(err error) ([]byte, error) { return nil, &Error{Op: "load", Manifest: l.key, Chunk: key, Err: err} }
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	rc, _, err := l.b.Get(ctx, key)
	if errors.Is(err, bucket.ErrNotFound) {
		return fail(fmt.Errorf("%w: the manifest names it, the bucket does not hold it", ErrMissing))
	}
	if err != nil {
		return fail(err)
	}
	defer rc.Close()
	l.chunks.Add(1)
	cr := iocount.NewReader(rc, &l.bytes)
	// Sealed unless asked: the Loader checks every page against the
	// manifest's checksum, which leaves the content's SHA-256 nothing to
	// catch that the seal and the key do not.
	read := frames.ReadChunkSealed
	if l.hash {
		read = frames.ReadChunk
	}
	_, content, err := read(cr, key, u.size, *buf, l.lim)
	if err != nil {
		return fail(err)
	}
	*buf = content
	return content, nil
}
