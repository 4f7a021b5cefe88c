package lanes

import (
	"context"
	"io"

	"github.com/framectl/framectl/frames"
)

// MaxUnwrittenPages bounds the pages a lane may gain without their contents
// being written: pages between the old end and a page written past it, and
// pages added by growing the size. Such pages are zeros, but each one costs a
// hash of a whole page and 8 bytes of table, so a lying frame ("the database
// now has 4 billion pages") could otherwise cost hours and gigabytes for a
// few bytes of input. SQLite never grows a database without writing the new
// pages except for the one pending-byte page at 1 GiB, so the bound is far
// above anything real.
//
// It applies to each Tracker call, to each frame (over all its parts), and
// across a Set: the zero pages a Set ever added may not exceed
// MaxUnwrittenPages plus the pages it received with contents (from frames and
// snapshots). So memory and hashing stay proportional to the bytes read.
const MaxUnwrittenPages = 1 << 16

// zeroPage supplies the contents of pages that were never written. Read only.
var zeroPage [65536]byte

// Tracker follows the rolling checksum of one lane without its file. It
// keeps h(pgno, page) for every page, so a write updates the checksum in
// O(1): the old page's hash is XORed out from the table, never read from
// disk. Memory: 8 bytes per page.
//
// The zero value is an empty tracker with no page size yet. A Tracker is
// not safe for concurrent use. Its errors match ErrCorrupt: a page of the
// wrong size or number is a stream the Tracker cannot follow.
type Tracker struct {
	pageSize uint32
	hashes   []uint64 // hashes[i] = frames.PageHash(i+1, page i+1)
	sum      frames.Checksum
}

// NewTracker returns an empty tracker for pages of pageSize bytes. A
// pageSize of 0 leaves it unset (see SetPageSize).
func NewTracker(pageSize uint32) (*Tracker, error) {
	t := &Tracker{}
	if pageSize != 0 {
		if err := t.SetPageSize(pageSize); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// PageSize returns the page size, 0 while unset.
func (t *Tracker) PageSize() uint32 { return t.pageSize }

// Pages returns the size in pages.
func (t *Tracker) Pages() uint32 { return uint32(len(t.hashes)) }

// Fingerprint returns the XOR of the hashes of pages first through
// first+pages-1 (1-based, within the lane): the terms of the rolling
// checksum over that range, which a manifest records for each chunk
// (frames.ChunkRef.Fingerprint). Nothing is read: a writer compares it
// with a manifest's to name an unchanged chunk without reading it.
func (t *Tracker) Fingerprint(first, pages uint32) uint64 {
	var fp uint64
	for _, h := range t.hashes[first-1 : first-1+pages] {
		fp ^= h
	}
	return fp
}

// Checksum returns the rolling checksum of the pages.
func (t *Tracker) Checksum() frames.Checksum { return t.sum }

// Clone returns an independent copy.
func (t *Tracker) Clone() *Tracker {
	c := *t
	c.hashes = append([]uint64(nil), t.hashes...)
	return &c
}

// SetPageSize sets the page size. An empty tracker takes any valid size; one
// holding pages accepts only the size it has.
func (t *Tracker) SetPageSize(pageSize uint32) error {
	if !frames.ValidPageSize(pageSize) {
		return corrupt("page size %d is not a power of two in 512..65536", pageSize)
	}
	if len(t.hashes) > 0 && pageSize != t.pageSize {
		return corrupt("page size %d, the lane's pages have %d", pageSize, t.pageSize)
	}
	t.pageSize = pageSize
	return nil
}

// Write records that page pgno now holds data (exactly PageSize bytes). A
// page past the end grows the lane to pgno; the pages between the old end
// and pgno are zeros, at most MaxUnwrittenPages of them.
func (t *Tracker) Write(pgno uint32, data []byte) error {
	if t.pageSize == 0 {
		return corrupt("page %d written before the page size is known", pgno)
	}
	if len(data) != int(t.pageSize) {
		return corrupt("page %d has %d bytes, page size is %d", pgno, len(data), t.pageSize)
	}
	if pgno == 0 || pgno > frames.MaxDatabasePages {
		return corrupt("page number %d out of range", pgno)
	}
	n := uint32(len(t.hashes))
	if pgno > n && pgno-n-1 > MaxUnwrittenPages {
		return corrupt("page %d written %d pages past the end (%d): more than %d unwritten pages", pgno, pgno-n-1, n, MaxUnwrittenPages)
	}
	h := frames.PageHash(pgno, data)
	if pgno <= n {
		t.sum ^= frames.Checksum(t.hashes[pgno-1] ^ h)
		t.hashes[pgno-1] = h
		return nil
	}
	t.growZero(pgno - 1)
	t.hashes = append(t.hashes, h)
	t.sum ^= frames.Checksum(h)
	return nil
}

// Resize sets the size in pages. Truncation removes the cut pages from the
// checksum; growth adds zero pages, at most MaxUnwrittenPages of them.
func (t *Tracker) Resize(pages uint32) error {
	n := uint32(len(t.hashes))
	switch {
	case pages > frames.MaxDatabasePages:
		return corrupt("size %d pages exceeds SQLite's maximum", pages)
	case pages < n:
		for _, h := range t.hashes[pages:] {
			t.sum ^= frames.Checksum(h)
		}
		t.hashes = t.hashes[:pages]
		t.shrink()
	case pages > n:
		if t.pageSize == 0 {
			return corrupt("lane grown to %d pages before the page size is known", pages)
		}
		if pages-n > MaxUnwrittenPages {
			return corrupt("lane grown from %d to %d pages without writing them: more than %d unwritten pages", n, pages, MaxUnwrittenPages)
		}
		t.growZero(pages)
	}
	return nil
}

// growZero appends zero pages up to pages. The caller has bounded the count.
func (t *Tracker) growZero(pages uint32) {
	zero := zeroPage[:t.pageSize]
	for pgno := uint32(len(t.hashes)) + 1; pgno <= pages; pgno++ {
		h := frames.PageHash(pgno, zero)
		t.hashes = append(t.hashes, h)
		t.sum ^= frames.Checksum(h)
	}
}

// shrink gives back the table's memory after a large truncation, keeping it
// when the lane is likely to grow back soon (a quarter of the table is
// still in use, or it is small).
func (t *Tracker) shrink() {
	const keep = 1 << 17 // 1 MiB of hashes
	if c := cap(t.hashes); c > keep && len(t.hashes) < c/4 {
		if len(t.hashes) == 0 {
			t.hashes = nil
			return
		}
		t.hashes = append([]uint64(nil), t.hashes...)
	}
}

// appendPages hashes whole pages that extend the lane contiguously: the
// pages of a file or snapshot read in order. The caller checked the count
// against frames.MaxDatabasePages.
func (t *Tracker) appendPages(data []byte) {
	ps := int(t.pageSize)
	for off := 0; off+ps <= len(data); off += ps {
		h := frames.PageHash(uint32(len(t.hashes))+1, data[off:off+ps])
		t.hashes = append(t.hashes, h)
		t.sum ^= frames.Checksum(h)
	}
}

// pageHash returns the tracked hash of page pgno (1..Pages).
func (t *Tracker) pageHash(pgno uint32) uint64 { return t.hashes[pgno-1] }

// copyBufferSize is the buffer of every streaming copy (snapshot load and
// write, file tracking and verification): a multiple of every page size,
// large enough that syscalls are a small part of the cost.
const copyBufferSize = 256 << 10

// TrackFile builds a tracker by reading a whole database file from r once,
// for a session that starts from a local database. The size must be a whole
// number of pages.
func TrackFile(ctx context.Context, r io.Reader, pageSize uint32) (*Tracker, error) {
	fail := func(err error) (*Tracker, error) { return nil, &Error{Op: "track", Err: err} }
	if !frames.ValidPageSize(pageSize) {
		return fail(corrupt("page size %d is not a power of two in 512..65536", pageSize))
	}
	t := &Tracker{pageSize: pageSize}
	buf := make([]byte, copyBufferSize)
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		n, err := io.ReadFull(r, buf)
		if n%int(pageSize) != 0 {
			if err == nil || err == io.ErrUnexpectedEOF {
				return fail(corrupt("file size is not a whole number of %d-byte pages", pageSize))
			}
			return fail(err)
		}
		if uint64(len(t.hashes))+uint64(n/int(pageSize)) > frames.MaxDatabasePages {
			return fail(corrupt("file has more pages than SQLite allows"))
		}
		t.appendPages(buf[:n])
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return t, nil
		default:
			return fail(err)
		}
	}
}
