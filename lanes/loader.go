package lanes

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/framectl/framectl/frames"
)

// Loader builds a Set from the pages of a snapshot that arrive in any
// order and from several goroutines at once: the chunks of a manifest,
// fetched in parallel. Each piece is written to its lane's file at its
// offset and hashed as it arrives (never read back); Set checks that
// every page of every lane came exactly once and that the pages have the
// checksum the header declares, and only then returns the Set.
//
// Memory grows with the pages received, not with the sizes the header
// claims: each piece's page hashes are kept apart until Set puts the
// lane's table together (8 bytes per page, as for any lane).
type Loader struct {
	dir        string
	key        string
	seq        frames.Seq
	commitTime int64
	lanes      map[uint32]*loaderLane
	order      []uint32 // ascending

	mu   sync.Mutex
	err  error // the first write that failed: the files hold unknown bytes
	done bool  // Set returned or Abort called
}

type loaderLane struct {
	decl frames.SnapshotLane
	file *laneFile
	// guarded by Loader.mu
	runs     []loadedRun
	received uint64 // pages
}

// loadedRun is one piece: the hashes of its pages, the first at first.
type loadedRun struct {
	first  uint32
	hashes []uint64
}

// NewLoader creates the lane files hdr lists in dir, empty, for a Set at
// hdr.Seq and hdr.CommitTime. key names the snapshot in errors. hdr is
// checked as a snapshot reader checks one (lanes ascending, of a known
// kind, a valid page size, whole pages, at most MaxLanes).
func NewLoader(dir string, hdr frames.Snapshot, key string) (*Loader, error) {
	s, err := NewSet(dir)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Loader, error) {
		for _, l := range s.lanes {
			l.remove() // best effort: the load already failed
		}
		return nil, &Error{Op: "load pages", Key: key, Err: err}
	}
	if len(hdr.Lanes) > MaxLanes {
		return fail(corrupt("%d lanes, limit %d", len(hdr.Lanes), MaxLanes))
	}
	ld := &Loader{dir: dir, key: key, seq: hdr.Seq, commitTime: hdr.CommitTime, lanes: make(map[uint32]*loaderLane, len(hdr.Lanes))}
	for i, sl := range hdr.Lanes {
		switch {
		case i > 0 && sl.Lane <= hdr.Lanes[i-1].Lane:
			return fail(corrupt("lanes not strictly ascending (%d after %d)", sl.Lane, hdr.Lanes[i-1].Lane))
		case sl.Kind != frames.LaneSQLitePages:
			return fail(unknownKind("lane %d of unknown kind %s", sl.Lane, sl.Kind))
		case !frames.ValidPageSize(sl.PageSize):
			return fail(corrupt("lane %d: page size %d is not a power of two in 512..65536", sl.Lane, sl.PageSize))
		case sl.Bytes%uint64(sl.PageSize) != 0 || sl.Pages() > frames.MaxDatabasePages:
			return fail(corrupt("lane %d: %d bytes is not a whole number of at most %d pages of %d bytes",
				sl.Lane, sl.Bytes, uint64(frames.MaxDatabasePages), sl.PageSize))
		case sl.Bytes == 0 && sl.Checksum != 0:
			return fail(corrupt("lane %d is empty but declares checksum %s", sl.Lane, sl.Checksum))
		}
		if err := s.createLane(sl.Lane, sl.Kind); err != nil {
			return fail(err)
		}
		f := s.lanes[sl.Lane]
		f.t.pageSize = sl.PageSize
		ld.lanes[sl.Lane] = &loaderLane{decl: sl, file: f}
		ld.order = append(ld.order, sl.Lane)
	}
	return ld, nil
}

// WritePages writes data, whole pages, as pages first, first+1, ... of
// lane, and hashes them. It is safe for concurrent use; pieces may come in
// any order, but each page only once (a page written twice is an error,
// here or at Set). A failed write leaves the files holding unknown bytes:
// every later call fails, and the caller aborts.
func (ld *Loader) WritePages(lane uint32, first uint32, data []byte) error {
	fail := func(err error) error { return &Error{Op: "load pages", Key: ld.key, Err: err} }
	l := ld.lanes[lane] // never written after NewLoader
	if l == nil {
		return fail(corrupt("lane %d is not in the snapshot", lane))
	}
	ps := uint64(l.decl.PageSize)
	n := uint64(len(data)) / ps
	switch {
	case len(data) == 0 || uint64(len(data))%ps != 0:
		return fail(corrupt("lane %d: %d bytes is not a whole number of %d-byte pages", lane, len(data), ps))
	case first == 0 || uint64(first)-1+n > l.decl.Pages():
		return fail(corrupt("lane %d: pages %d..%d are outside the lane's %d pages", lane, first, uint64(first)-1+n, l.decl.Pages()))
	}
	if err := ld.usable(); err != nil {
		return fail(err)
	}
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = frames.PageHash(first+uint32(i), data[uint64(i)*ps:uint64(i+1)*ps])
	}
	ld.mu.Lock()
	if l.received+n > l.decl.Pages() {
		ld.mu.Unlock()
		return fail(corrupt("lane %d: pages %d..%d bring the pages received past the lane's %d: a page came twice",
			lane, first, uint64(first)-1+n, l.decl.Pages()))
	}
	l.received += n
	l.runs = append(l.runs, loadedRun{first: first, hashes: hashes})
	ld.mu.Unlock()
	if _, err := l.file.f.WriteAt(data, int64(first-1)*int64(ps)); err != nil {
		err = fmt.Errorf("write %s: %w", l.file.path, err)
		ld.mu.Lock()
		if ld.err == nil {
			ld.err = err
		}
		ld.mu.Unlock()
		return fail(err)
	}
	return nil
}

func (ld *Loader) usable() error {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	switch {
	case ld.done:
		return &problem{kind: ErrBroken, msg: "loader is done"}
	case ld.err != nil:
		return &broken{cause: ld.err}
	}
	return nil
}

// Set checks that every page of every lane was written exactly once and
// that each lane's pages have the checksum the header declares
// (ErrChecksum otherwise, naming the lane), and returns the Set. Call it
// once every WritePages has returned. On failure the lane files are
// removed; either way the Loader is done.
func (ld *Loader) Set() (*Set, error) {
	fail := func(err error) (*Set, error) {
		ld.Abort()
		return nil, &Error{Op: "load pages", Key: ld.key, Err: err}
	}
	if err := ld.usable(); err != nil {
		return fail(err)
	}
	s := &Set{dir: ld.dir, lanes: make(map[uint32]*laneFile, len(ld.lanes)), seq: ld.seq, commitTime: ld.commitTime}
	for _, n := range ld.order {
		l := ld.lanes[n]
		if err := l.assemble(); err != nil {
			return fail(fmt.Errorf("lane %d: %w", n, err))
		}
		if err := checkFileSize(l.file.f, &l.file.t); err != nil {
			return fail(fmt.Errorf("lane %d (%s): %w", n, l.file.path, err))
		}
		s.lanes[n] = l.file
		s.stats.PagesLoaded += uint64(l.file.t.Pages())
	}
	ld.mu.Lock()
	ld.done = true
	ld.mu.Unlock()
	return s, nil
}

// assemble puts the lane's pieces together into its tracker: contiguous
// from page 1 to the last page, nothing twice, nothing missing, and the
// checksum declared.
func (l *loaderLane) assemble() error {
	slices.SortFunc(l.runs, func(a, b loadedRun) int { return cmp.Compare(a.first, b.first) })
	next := uint64(1)
	for _, r := range l.runs {
		switch {
		case uint64(r.first) < next:
			return corrupt("page %d came twice", r.first)
		case uint64(r.first) > next:
			return corrupt("pages %d..%d are missing", next, r.first-1)
		}
		next += uint64(len(r.hashes))
	}
	if want := l.decl.Pages(); next-1 != want {
		return corrupt("pages %d..%d are missing", next, want)
	}
	t := &l.file.t
	t.hashes = make([]uint64, 0, l.decl.Pages()) // every page is here: the table costs what was read
	for _, r := range l.runs {
		t.hashes = append(t.hashes, r.hashes...)
		for _, h := range r.hashes {
			t.sum ^= frames.Checksum(h)
		}
	}
	l.runs = nil
	if t.sum != l.decl.Checksum {
		return checksumError("pages hash to checksum %s, the snapshot declares %s", t.sum, l.decl.Checksum)
	}
	return nil
}

// Abort closes and removes the lane files. Call it when the load failed
// or was abandoned; after Set returned a Set, it does nothing.
func (ld *Loader) Abort() {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.done {
		return
	}
	ld.done = true
	for _, l := range ld.lanes {
		l.file.remove() // best effort: the load already failed
	}
}
