package lanes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/framectl/framectl/frames"
)

// DefaultPageSize is the page size a snapshot declares for a lane that is
// empty and has no page size yet. Any page size is right for an empty lane
// (the next frame sets it), and a snapshot must name a valid one; this is
// SQLite's default.
const DefaultPageSize = 4096

// LoadSnapshot builds a Set in dir from a snapshot: each lane's bytes are
// written to its file and hashed as they stream (never read back), and Seq
// and CommitTime come from the header. The Set is returned only once sr
// reported io.EOF (the whole snapshot verified). key names the snapshot in
// errors. On failure the lane files it created are removed.
func LoadSnapshot(ctx context.Context, dir string, sr *frames.SnapshotReader, key string) (*Set, error) {
	s, err := NewSet(dir)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Set, error) {
		for _, l := range s.lanes {
			l.remove() // best effort: the load already failed
		}
		s.err = errClosed
		return nil, &Error{Op: "load snapshot", Key: key, Err: err}
	}
	buf := make([]byte, copyBufferSize)
	for {
		sl, r, err := sr.NextLane()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if sl.Kind != frames.LaneSQLitePages {
			return fail(unknownKind("lane %d of unknown kind %s", sl.Lane, sl.Kind))
		}
		if _, ok := s.lanes[sl.Lane]; ok || len(s.lanes) >= MaxLanes {
			return fail(corrupt("lane %d listed twice or past %d lanes", sl.Lane, MaxLanes))
		}
		if err := s.createLane(sl.Lane, sl.Kind); err != nil {
			return fail(err)
		}
		l := s.lanes[sl.Lane]
		if err := l.t.SetPageSize(sl.PageSize); err != nil {
			return fail(fmt.Errorf("lane %d: %w", sl.Lane, err))
		}
		if err := loadLane(ctx, l, r, sl, buf); err != nil {
			return fail(fmt.Errorf("lane %d: %w", sl.Lane, err))
		}
		s.stats.PagesLoaded += uint64(l.t.Pages())
	}
	hdr := sr.Header()
	s.seq, s.commitTime = hdr.Seq, hdr.CommitTime
	return s, nil
}

// loadLane copies one lane's bytes from r to its file, hashing pages as
// they pass. The table grows with the pages read, not with the size the
// header claims.
//
// Reading r (inflating the snapshot) and writing and hashing what it gave
// take about as long each, so they run on two goroutines with a few buffers
// between them: a snapshot loads about as fast as it inflates (measured on
// 1 GiB: 9.3 s sequential). If loadLane fails, r may still be in use by the
// reading goroutine until the caller closes what r reads from: the caller
// must not use r (or its SnapshotReader) again.
func loadLane(ctx context.Context, l *laneFile, r io.Reader, sl frames.SnapshotLane, buf []byte) error {
	l.t.hashes = make([]uint64, 0, min(sl.Pages(), 1<<16))
	ps := int(sl.PageSize)
	type chunk struct {
		b   []byte
		n   int
		err error
	}
	const depth = 3
	free, full := make(chan []byte, depth), make(chan chunk, depth)
	free <- buf
	for range depth - 1 {
		free <- make([]byte, len(buf))
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			var b []byte
			select {
			case b = <-free:
			case <-done:
				return
			}
			n, err := io.ReadFull(r, b)
			select {
			case full <- chunk{b, n, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var c chunk
		select {
		case c = <-full:
		case <-ctx.Done():
			return ctx.Err()
		}
		n, err := c.n, c.err
		if n%ps != 0 && (err == nil || err == io.ErrUnexpectedEOF) {
			return corrupt("lane bytes end inside a page")
		}
		if n > 0 {
			if uint64(l.t.Pages())+uint64(n/ps) > sl.Pages() {
				return corrupt("more bytes than the header declares")
			}
			if _, err := l.f.Write(c.b[:n]); err != nil {
				return fmt.Errorf("write %s: %w", l.path, err)
			}
			l.t.appendPages(c.b[:n])
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
		free <- c.b
	}
	// The snapshot reader checked the bytes against the header; this checks
	// that what the tracker saw is what the reader checked.
	if uint64(l.t.Pages()) != sl.Pages() || l.t.sum != sl.Checksum {
		return checksumError("read %d pages with checksum %s, the header declares %d pages with %s",
			l.t.Pages(), l.t.sum, sl.Pages(), sl.Checksum)
	}
	return nil
}

// Source is one lane to write into a snapshot: its tracked state and the
// file (or anything else) holding its bytes, page n at (n-1) * PageSize.
type Source struct {
	Lane    uint32
	Kind    frames.LaneKind
	Tracker *Tracker
	File    io.ReaderAt
}

// WriteSnapshot streams a snapshot of sources into w: the header from the
// trackers (sizes and checksums; hdr gives Epoch, Seq and CommitTime, and
// hdr.Lanes must be empty), then each lane's bytes read from its File
// through a bounded buffer. Every page read is checked against its tracker
// (ErrChecksum names the lane and page), so a snapshot never carries bytes
// that differ from the state tracked. It returns the header written. On
// error, what was written to w must be discarded.
func WriteSnapshot(ctx context.Context, w io.Writer, hdr frames.Snapshot, sources []Source, opts frames.WriteOptions) (frames.Snapshot, error) {
	fail := func(err error) (frames.Snapshot, error) {
		return frames.Snapshot{}, &Error{Op: "write snapshot", Err: err}
	}
	if len(hdr.Lanes) != 0 {
		return fail(errors.New("hdr.Lanes must be empty: the sources define the lanes"))
	}
	sources = slices.Clone(sources)
	slices.SortFunc(sources, func(a, b Source) int { return cmp.Compare(a.Lane, b.Lane) })
	for i, src := range sources {
		if src.Tracker == nil || src.File == nil {
			return fail(fmt.Errorf("lane %d has no tracker or no file", src.Lane))
		}
		t := src.Tracker
		ps := t.pageSize
		if ps == 0 {
			ps = DefaultPageSize // empty lane, page size not known yet
		}
		if i > 0 && src.Lane == sources[i-1].Lane {
			return fail(fmt.Errorf("lane %d given twice", src.Lane))
		}
		hdr.Lanes = append(hdr.Lanes, frames.SnapshotLane{Lane: src.Lane, Kind: src.Kind, PageSize: ps,
			Bytes: uint64(t.Pages()) * uint64(ps), Checksum: t.sum})
	}
	sw, err := frames.NewSnapshotWriter(w, hdr, opts)
	if err != nil {
		return fail(err)
	}
	buf := make([]byte, copyBufferSize)
	emit := func(b []byte) error { _, err := sw.Write(b); return err }
	for _, src := range sources {
		if err := scanLane(ctx, src.File, src.Tracker, buf, emit); err != nil {
			return fail(fmt.Errorf("lane %d: %w", src.Lane, err))
		}
	}
	if err := sw.Close(); err != nil {
		return fail(err)
	}
	return hdr, nil
}

// WriteSnapshot streams a snapshot of the Set at Seq, written by epoch, into
// w (see the package-level WriteSnapshot).
func (s *Set) WriteSnapshot(ctx context.Context, w io.Writer, epoch frames.Epoch, opts frames.WriteOptions) (frames.Snapshot, error) {
	if err := s.usable("write snapshot"); err != nil {
		return frames.Snapshot{}, err
	}
	if err := s.idle("write snapshot"); err != nil {
		return frames.Snapshot{}, err
	}
	if n := s.Pending(); n > 0 {
		return frames.Snapshot{}, &Error{Op: "write snapshot", Err: fmt.Errorf("%w: %d chunks of a lazy set are not in its files", ErrNotLoaded, n)}
	}
	sources, err := s.Sources()
	if err != nil {
		return frames.Snapshot{}, err
	}
	return WriteSnapshot(ctx, w, frames.Snapshot{Epoch: epoch, Seq: s.seq, CommitTime: s.commitTime}, sources, opts)
}
