package chunks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/workers"
	"github.com/framectl/framectl/lanes"
)

// Written is what Write stored.
type Written struct {
	Key      string          // the manifest's
	Manifest frames.Manifest // as uploaded
	// ManifestBytes is the size of the manifest object.
	ManifestBytes int64
	// Chunks and ChunkBytes count the chunk objects uploaded and their
	// stored bytes; Skipped and SkippedBytes the chunk references whose
	// chunk the bucket was known to hold (Have, or uploaded earlier in the
	// same Write), with their content bytes.
	Chunks       int
	ChunkBytes   int64
	Skipped      int
	SkippedBytes int64
	// Unread counts the skipped references named by their fingerprint
	// (Options.Prior), whose pages Write never read.
	Unread int
	// Put lists the chunks uploaded (Chunks of them), in no order: the
	// writer of a session remembers them as its own (compact.Owner).
	Put []frames.ChunkHash
}

// Uploaded is every byte Write uploaded: the chunks and the manifest.
func (w Written) Uploaded() int64 { return w.ChunkBytes + w.ManifestBytes }

// Write stores sources as a manifest of chunks at
// a.SnapshotKey(m.Epoch, m.Seq): m gives Epoch, Seq, CommitTime and
// Predecessor, and m.Lanes must be empty (the sources define them). Each
// lane is cut into chunks of frames.DefaultChunkPages pages, every page
// checked against its tracker as it is read (lanes.ReadPages); the chunks
// not in have, nor uploaded earlier in this call, are uploaded, and once
// every upload succeeded the manifest is. The trackers and files must not
// change until Write returns.
//
// On error nothing is known about the manifest's key (it was not written
// by this call); chunks it uploaded stay, harmless: nothing names them.
func Write(ctx context.Context, b bucket.Bucket, a frames.Actor, m frames.Manifest, sources []lanes.Source, have Have, opts Options) (Written, error) {
	opts = opts.withDefaults()
	key := a.SnapshotKey(m.Epoch, m.Seq)
	fail := func(chunk string, err error) (Written, error) {
		return Written{}, &Error{Op: "write", Manifest: key, Chunk: chunk, Err: err}
	}
	if len(m.Lanes) != 0 {
		return fail("", fmt.Errorf("%w: m.Lanes must be empty: the sources define the lanes", frames.ErrInvalid))
	}
	sources = slices.Clone(sources)
	slices.SortFunc(sources, func(x, y lanes.Source) int { return cmp.Compare(x.Lane, y.Lane) })
	var jobs []writeJob
	var perWorker int64
	for i, src := range sources {
		if src.Tracker == nil || src.File == nil {
			return fail("", fmt.Errorf("%w: lane %d has no tracker or no file", frames.ErrInvalid, src.Lane))
		}
		if i > 0 && src.Lane == sources[i-1].Lane {
			return fail("", fmt.Errorf("%w: lane %d given twice", frames.ErrInvalid, src.Lane))
		}
		t := src.Tracker
		ps := t.PageSize()
		if ps == 0 {
			ps = lanes.DefaultPageSize // empty lane, page size not known yet
		}
		l := frames.ManifestLane{Lane: src.Lane, Kind: src.Kind, PageSize: ps, Pages: t.Pages(),
			Checksum: t.Checksum(), ChunkPages: frames.DefaultChunkPages(ps)}
		n := (uint64(l.Pages) + uint64(l.ChunkPages) - 1) / uint64(l.ChunkPages)
		if n > 0 {
			l.Chunks = make([]frames.ChunkRef, n) // nil when empty, as a manifest reads back
		}
		for c := range l.Chunks {
			first := uint64(c)*uint64(l.ChunkPages) + 1
			pages := min(uint64(l.ChunkPages), uint64(l.Pages)-first+1)
			l.Chunks[c] = frames.ChunkRef{FirstPage: uint32(first), Pages: uint32(pages)}
			jobs = append(jobs, writeJob{lane: len(m.Lanes), chunk: c, src: i})
		}
		m.Lanes = append(m.Lanes, l)
		perWorker = max(perWorker, 2*int64(l.ChunkPages)*int64(ps)) // content and its encoding
	}

	w := &writer{b: b, a: a, m: &m, sources: sources, opts: opts,
		have: maps.Clone(have), pending: map[frames.ChunkHash]*upload{}, prior: printsOf(opts.Prior)}
	if w.have == nil {
		w.have = Have{}
	}
	if err := w.run(ctx, jobs, opts.workers(perWorker, len(jobs))); err != nil {
		return Written{}, err
	}

	var buf bytes.Buffer
	if err := frames.WriteManifest(&buf, m, frames.WriteOptions{Level: opts.Compression}); err != nil {
		return fail("", err)
	}
	size := int64(buf.Len())
	// Unconditional, as every snapshot: an object already at this key
	// describes this very state (the key is the session and the seq).
	if _, err := b.Put(ctx, key, &buf, size, bucket.Condition{}); err != nil {
		return fail("", err)
	}
	res := w.res
	res.Key, res.Manifest, res.ManifestBytes = key, m, size
	return res, nil
}

// print is what a chunk's fingerprint is compared with: the range it
// covers and the fingerprint itself.
type print struct {
	lane, pageSize, first, pages uint32
	fingerprint                  uint64
}

// printsOf indexes m's chunks that record a fingerprint.
func printsOf(m *frames.Manifest) map[print]frames.ChunkRef {
	if m == nil {
		return nil
	}
	ps := map[print]frames.ChunkRef{}
	for _, l := range m.Lanes {
		for _, c := range l.Chunks {
			if c.Fingerprint != 0 {
				ps[print{l.Lane, l.PageSize, c.FirstPage, c.Pages, c.Fingerprint}] = c
			}
		}
	}
	return ps
}

// writeJob is one chunk to store: chunk c of m.Lanes[lane], read from
// sources[src].
type writeJob struct {
	lane, chunk, src int
}

// writer is one Write's chunk uploads.
type writer struct {
	b       bucket.Bucket
	a       frames.Actor
	m       *frames.Manifest
	sources []lanes.Source
	opts    Options

	prior map[print]frames.ChunkRef // Options.Prior's chunks by fingerprint

	mu      sync.Mutex
	have    Have                         // stored, by this call or before
	pending map[frames.ChunkHash]*upload // being uploaded by a worker
	res     Written
}

// upload is one chunk being uploaded; done is closed when it ends, size
// or err set.
type upload struct {
	done chan struct{}
	size uint64
	err  error
}

// writeBuffers are one worker's: a chunk's content and its encoding.
type writeBuffers struct {
	content []byte
	enc     bytes.Buffer
}

func (w *writer) run(ctx context.Context, jobs []writeJob, n int) error {
	err := workers.Run(ctx, jobs, n, func(ctx context.Context, bufs *writeBuffers, j writeJob) error {
		return w.store(ctx, j, &bufs.content, &bufs.enc)
	})
	var ce *Error
	if err != nil && !errors.As(err, &ce) {
		return &Error{Op: "write", Manifest: w.a.SnapshotKey(w.m.Epoch, w.m.Seq), Err: err}
	}
	return err
}

// store reads, hashes and, unless the bucket holds it, uploads one chunk,
// and fills in its reference.
func (w *writer) store(ctx context.Context, j writeJob, content *[]byte, enc *bytes.Buffer) error {
	l := &w.m.Lanes[j.lane]
	ref := &l.Chunks[j.chunk] // each job owns its reference
	fail := func(chunk string, err error) error {
		return &Error{Op: "write", Manifest: w.a.SnapshotKey(w.m.Epoch, w.m.Seq), Chunk: chunk, Err: err}
	}
	size := int(ref.Pages) * int(l.PageSize)
	ref.Fingerprint = w.sources[j.src].Tracker.Fingerprint(ref.FirstPage, ref.Pages)
	if c, ok := w.prior[print{l.Lane, l.PageSize, ref.FirstPage, ref.Pages, ref.Fingerprint}]; ok && ref.Fingerprint != 0 {
		ref.Hash, ref.StoredSize = c.Hash, c.StoredSize
		w.mu.Lock()
		w.res.Skipped++
		w.res.SkippedBytes += int64(size)
		w.res.Unread++
		w.mu.Unlock()
		return nil
	}
	if cap(*content) < size {
		*content = make([]byte, int(l.ChunkPages)*int(l.PageSize))
	}
	data := (*content)[:size]
	if err := lanes.ReadPages(w.sources[j.src], ref.FirstPage, data); err != nil {
		return fail("", err)
	}
	h := frames.SumChunk(data)
	ref.Hash = h
	key := w.a.ChunkKey(h)

	w.mu.Lock()
	if stored, ok := w.have[h]; ok {
		ref.StoredSize = stored
		w.res.Skipped++
		w.res.SkippedBytes += int64(size)
		w.mu.Unlock()
		return nil
	}
	if up := w.pending[h]; up != nil {
		// Another worker is uploading the same content: wait for it.
		w.mu.Unlock()
		select {
		case <-up.done:
		case <-ctx.Done():
			return fail(key, ctx.Err())
		}
		if up.err != nil {
			return fail(key, up.err)
		}
		w.mu.Lock()
		ref.StoredSize = up.size
		w.res.Skipped++
		w.res.SkippedBytes += int64(size)
		w.mu.Unlock()
		return nil
	}
	up := &upload{done: make(chan struct{})}
	w.pending[h] = up
	w.mu.Unlock()

	up.size, up.err = w.put(ctx, key, data, enc)
	w.mu.Lock()
	delete(w.pending, h)
	if up.err == nil {
		w.have[h] = up.size
		ref.StoredSize = up.size
		w.res.Chunks++
		w.res.ChunkBytes += int64(up.size)
		w.res.Put = append(w.res.Put, h)
	}
	w.mu.Unlock()
	close(up.done)
	if up.err != nil {
		return fail(key, up.err)
	}
	return nil
}

// put encodes one chunk and uploads it, returning its stored size.
func (w *writer) put(ctx context.Context, key string, data []byte, enc *bytes.Buffer) (uint64, error) {
	enc.Reset()
	hdr, size, err := frames.WriteChunk(enc, data, frames.WriteOptions{Level: w.opts.Compression})
	if err != nil {
		return 0, err
	}
	if got := w.a.ChunkKey(hdr.Hash); got != key {
		// WriteChunk hashes the content itself; the two must agree.
		return 0, fmt.Errorf("encoded chunk has key %s", got)
	}
	// Unconditional: whatever is at a chunk's key has this content, or is
	// damage that this write repairs.
	if _, err := w.b.Put(ctx, key, bytes.NewReader(enc.Bytes()), int64(size), bucket.Condition{}); err != nil {
		return 0, err
	}
	return size, nil
}
