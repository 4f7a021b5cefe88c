package lanes

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/framectl/framectl/frames"
)

// A lazy Set starts from a manifest without its chunks: each lane's file
// is created at its size with nothing written (a sparse file on file
// systems that have them), and its tracker holds, for every chunk not
// loaded yet, the chunk's fingerprint as the hash of its first page and
// zero for the others. Those terms XOR to the same lane checksum and the
// same Tracker.Fingerprint over the chunk's range as the real page hashes
// would, so the checksum chain is checked frame by frame exactly as for a
// loaded Set, and a writer given the manifest as its prior
// (chunks.Options.Prior) names such a chunk unread.
//
// What a frame would change in a chunk not loaded needs the chunk's pages
// (a write XORs out the old page's hash; a truncation inside a chunk keeps
// part of it; growth appends to the last, partial, chunk), so before a
// frame is applied its caller asks Needs which chunks it touches, fetches
// them and hands each to Fill, which checks its pages against the
// fingerprint and writes them. Apply refuses (ErrNotLoaded) a frame that
// touches a chunk not loaded, so a caller that skips Needs gets an error,
// never a wrong state. Chunks cut off whole by a truncation are dropped
// unread: their terms leave the checksum as their pages would.

// ErrNotLazy: a manifest that cannot back a lazy Set (a chunk with no
// fingerprint recorded, fingerprints that do not XOR to the lane's
// checksum): load it whole instead.
var ErrNotLazy = errors.New("manifest cannot back a lazy set")

// ErrNotLoaded: Apply was given a frame that touches a chunk of a lazy Set
// not loaded yet (see Needs). The Set is unchanged.
var ErrNotLoaded = errors.New("chunk not loaded")

// ChunkID names chunk Index (0-based, in the manifest's order) of lane
// Lane of the manifest a lazy Set was made from.
type ChunkID struct {
	Lane  uint32
	Index int
}

// lazyLane is what a lane of a lazy Set still lacks.
type lazyLane struct {
	chunkPages uint32
	basePages  uint32 // the manifest's pages: a pending chunk lies within them
	pending    []bool // by chunk index: not loaded, its terms are the fingerprint
	left       int    // pending chunks
}

// extent returns the pages chunk i covers in the manifest.
func (z *lazyLane) extent(i int) (first, pages uint32) {
	first = uint32(i)*z.chunkPages + 1
	return first, min(z.chunkPages, z.basePages-first+1)
}

func (z *lazyLane) isPending(pgno uint32) (int, bool) {
	if pgno == 0 {
		return 0, false
	}
	i := int((pgno - 1) / z.chunkPages)
	return i, i < len(z.pending) && z.pending[i]
}

// cut drops the pending chunks past a truncation to pages: their terms
// left the tracker with them.
func (z *lazyLane) cut(pages uint32) {
	keep := int((uint64(pages) + uint64(z.chunkPages) - 1) / uint64(z.chunkPages))
	for i := keep; i < len(z.pending); i++ {
		if z.pending[i] {
			z.pending[i] = false
			z.left--
		}
	}
	if keep < len(z.pending) {
		z.pending = z.pending[:keep]
	}
}

// touched returns, ascending, the pending chunks that the sqlitePages
// frame part p touches when applied to a lane of n pages: a page written
// in one; the last chunk when it is partial and the lane grows (pages are
// appended to it); the chunk a truncation ends inside.
func (z *lazyLane) touched(p *frames.SQLitePages, n uint32) []int {
	if z.left == 0 {
		return nil
	}
	var out []int
	// Ascending as found: pages are ascending and at most n (the growth
	// chunk holds page n), or at most the truncated size (the chunk it
	// ends in).
	add := func(i int, ok bool) {
		if ok && (len(out) == 0 || out[len(out)-1] < i) {
			out = append(out, i)
		}
	}
	grows := !p.Continued && p.DatabasePages > n
	for i := range p.Pages {
		pg := p.Pages[i].Number
		if pg > n {
			grows = true
			break // ascending: the rest are past the end too
		}
		add(z.isPending(pg))
	}
	if grows && n%z.chunkPages != 0 {
		add(z.isPending(n))
	}
	if d := p.DatabasePages; !p.Continued && d < n && d%z.chunkPages != 0 {
		add(z.isPending(d))
	}
	return out
}

// NewLazySet returns a Set at m's state whose pages are not loaded: see
// the comment at the top of this file. key names the manifest in errors.
// m must be a verified manifest (frames.ReadManifest); its lanes are
// checked as NewLoader checks a header, and a manifest that cannot back a
// lazy Set is refused with ErrNotLazy. Stats count the manifest's pages
// as loaded, as after LoadSnapshot, so that the bound on unwritten pages
// is the same either way.
//
// Memory: 8 bytes per page for the tracker, as any Set, and one byte per
// chunk. Disk: what Fill and the frames write.
func NewLazySet(dir string, m *frames.Manifest, key string) (*Set, error) {
	fail := func(err error) (*Set, error) { return nil, &Error{Op: "load lazily", Key: key, Err: err} }
	for _, l := range m.Lanes {
		// What frames.ReadManifest checks and the chunk arithmetic below
		// relies on: a manifest built by hand gets an error, not a panic.
		if l.ChunkPages == 0 || uint64(len(l.Chunks)) != (uint64(l.Pages)+uint64(l.ChunkPages)-1)/uint64(l.ChunkPages) {
			return fail(corrupt("lane %d: %d chunks of %d pages for %d pages", l.Lane, len(l.Chunks), l.ChunkPages, l.Pages))
		}
		var fp uint64
		for _, c := range l.Chunks {
			if c.Fingerprint == 0 {
				return fail(fmt.Errorf("%w: lane %d: chunk at page %d records no fingerprint", ErrNotLazy, l.Lane, c.FirstPage))
			}
			fp ^= c.Fingerprint
		}
		if frames.Checksum(fp) != l.Checksum {
			return fail(fmt.Errorf("%w: lane %d: chunk fingerprints XOR to %s, the lane's checksum is %s",
				ErrNotLazy, l.Lane, frames.Checksum(fp), l.Checksum))
		}
	}
	ld, err := NewLoader(dir, m.Header(), key)
	if err != nil {
		return nil, err
	}
	s := &Set{dir: dir, lanes: make(map[uint32]*laneFile, len(m.Lanes)), seq: m.Seq, commitTime: m.CommitTime}
	for _, l := range m.Lanes {
		f := ld.lanes[l.Lane].file
		z := &lazyLane{chunkPages: l.ChunkPages, basePages: l.Pages, pending: make([]bool, len(l.Chunks)), left: len(l.Chunks)}
		f.t.hashes = make([]uint64, l.Pages)
		for i, c := range l.Chunks {
			if first, pages := z.extent(i); c.FirstPage != first || c.Pages != pages {
				ld.Abort()
				return fail(corrupt("lane %d: chunk %d covers pages %d+%d, want %d+%d", l.Lane, i, c.FirstPage, c.Pages, first, pages))
			}
			z.pending[i] = true
			f.t.hashes[c.FirstPage-1] = c.Fingerprint
		}
		f.t.sum = l.Checksum
		f.lazy = z
		if err := f.f.Truncate(int64(l.Bytes())); err != nil {
			ld.Abort()
			return fail(fmt.Errorf("truncate %s: %w", f.path, err))
		}
		s.lanes[l.Lane] = f
		s.stats.PagesLoaded += uint64(l.Pages)
	}
	ld.mu.Lock()
	ld.done = true
	ld.mu.Unlock()
	return s, nil
}

// Needs returns the chunks not loaded yet that applying f (a frame, or
// the next part of a continued one) would touch, ascending by lane and
// index; nil when there are none, when the Set is not lazy, and for a
// frame Apply would skip or refuse before writing anything.
func (s *Set) Needs(f *frames.Frame) []ChunkID {
	if f == nil || f.Kind != frames.KindSQLitePages || s.err != nil {
		return nil
	}
	if s.part == nil && (f.LastSeq <= s.seq || f.FirstSeq > s.seq+1) {
		return nil
	}
	l := s.lanes[f.Lane]
	if l == nil || l.lazy == nil {
		return nil
	}
	var out []ChunkID
	for _, i := range l.lazy.touched(&f.SQLite, l.t.Pages()) {
		out = append(out, ChunkID{Lane: f.Lane, Index: i})
	}
	return out
}

// Pending returns how many chunks of a lazy Set are not loaded.
func (s *Set) Pending() int {
	n := 0
	for _, l := range s.lanes {
		if l.lazy != nil {
			n += l.lazy.left
		}
	}
	return n
}

// Fill loads chunk id of a lazy Set with content, the chunk's pages as the
// manifest names them (a verified chunk: frames.ReadChunk). The pages'
// hashes must XOR to the chunk's fingerprint (ErrChecksum otherwise,
// naming the lane and the chunk, and the Set is unchanged); then they are
// written to the file and replace the chunk's terms in the tracker, which
// leaves the checksum as it was. Fill is not safe for concurrent use, as
// nothing of a Set is.
func (s *Set) Fill(id ChunkID, content []byte) error {
	fail := func(err error) error {
		return &Error{Op: "fill", Err: fmt.Errorf("lane %d, chunk %d: %w", id.Lane, id.Index, err)}
	}
	if err := s.usable("fill"); err != nil {
		return err
	}
	l := s.lanes[id.Lane]
	if l == nil || l.lazy == nil || id.Index < 0 || id.Index >= len(l.lazy.pending) || !l.lazy.pending[id.Index] {
		return fail(fmt.Errorf("%w: not a chunk waiting to be loaded", ErrNotLoaded))
	}
	z, t := l.lazy, &l.t
	first, pages := z.extent(id.Index)
	ps := int(t.pageSize)
	if len(content) != int(pages)*ps {
		return fail(corrupt("%d bytes, the chunk holds %d pages of %d", len(content), pages, ps))
	}
	hashes := make([]uint64, pages)
	var fp uint64
	for i := range hashes {
		hashes[i] = frames.PageHash(first+uint32(i), content[i*ps:(i+1)*ps])
		fp ^= hashes[i]
	}
	if want := t.Fingerprint(first, pages); fp != want {
		return fail(checksumError("pages %d..%d hash to fingerprint %016x, the manifest records %016x", first, first+pages-1, fp, want))
	}
	if _, err := l.f.WriteAt(content, int64(first-1)*int64(ps)); err != nil {
		return s.fail(fail(fmt.Errorf("write %s: %w", l.path, err)))
	}
	copy(t.hashes[first-1:], hashes)
	z.pending[id.Index] = false
	z.left--
	return nil
}

// notLoaded checks that the sqlitePages part f touches no chunk of lane l
// that is not loaded.
func notLoaded(f *frames.Frame, l *laneFile) error {
	if l.lazy == nil {
		return nil
	}
	if ids := l.lazy.touched(&f.SQLite, l.t.Pages()); len(ids) > 0 {
		return fmt.Errorf("%w: lane %d: the frame touches chunk %d (Needs names it)", ErrNotLoaded, f.Lane, ids[0])
	}
	return nil
}

// lazySpan reports whether page pgno of lane l is in a chunk not loaded,
// and how many pages from pgno to the end of its chunk (or of the lane,
// for a page past the manifest's chunks).
func (l *laneFile) lazySpan(pgno uint32) (pending bool, pages uint32) {
	n := l.t.Pages()
	if l.lazy == nil {
		return false, n - pgno + 1
	}
	i, ok := l.lazy.isPending(pgno)
	end := (uint32(i) + 1) * l.lazy.chunkPages
	if uint64(end) > uint64(n) || i >= len(l.lazy.pending) {
		end = n
	}
	return ok, end - pgno + 1
}

// scanLazy is scanLane for a lane with chunks not loaded: their pages are
// not read, their terms are taken from the tracker, and every other page is
// read and checked as scanLane does.
func (l *laneFile) scanLazy(ctx context.Context, r io.ReaderAt, t *Tracker, buf []byte, emit func([]byte) error) error {
	if emit != nil {
		return fmt.Errorf("%w: a lazy lane cannot be read whole", ErrNotLoaded)
	}
	pages := t.Pages()
	ps := int64(t.pageSize)
	per := uint32(int64(len(buf)) / ps)
	var sum frames.Checksum
	for pgno := uint32(1); pgno <= pages; {
		if err := ctx.Err(); err != nil {
			return err
		}
		pending, span := l.lazySpan(pgno)
		if pending {
			for i := range span {
				sum ^= frames.Checksum(t.pageHash(pgno + i))
			}
			pgno += span
			continue
		}
		n := min(per, span)
		chunk := buf[:int64(n)*ps]
		off := int64(pgno-1) * ps
		if got, err := r.ReadAt(chunk, off); got < len(chunk) {
			if err == nil || err == io.EOF {
				return checksumError("file ends at byte %d, the lane has %d pages of %d", off+int64(got), pages, ps)
			}
			return err
		}
		for i := range n {
			h := frames.PageHash(pgno, chunk[int64(i)*ps:int64(i+1)*ps])
			if h != t.pageHash(pgno) {
				return checksumError("page %d: hash %s, tracked %s", pgno, frames.Checksum(h), frames.Checksum(t.pageHash(pgno)))
			}
			sum ^= frames.Checksum(h)
			pgno++
		}
	}
	if sum != t.sum {
		return checksumError("pages hash to checksum %s, the rolling checksum is %s", sum, t.sum)
	}
	return nil
}
