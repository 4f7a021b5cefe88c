package lanes

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fsync"
)

// MainLane is the lane of the actor's SQLite database.
const MainLane uint32 = 0

// MaxLanes bounds the lanes of a Set: a snapshot cannot hold more
// (frames.DefaultMaxLanes), and each lane holds an open file.
const MaxLanes = frames.DefaultMaxLanes

// runBufferSize bounds one coalesced pwrite (see pwrite.go).
const runBufferSize = 256 << 10

// Lane describes one lane of a Set at the moment it was asked for.
type Lane struct {
	Number   uint32
	Kind     frames.LaneKind
	PageSize uint32 // 0 while an empty lane has not taken one yet
	Pages    uint32
	Checksum frames.Checksum
	Path     string // the lane's file
}

// Bytes returns the size of the lane's file.
func (l Lane) Bytes() int64 { return int64(l.Pages) * int64(l.PageSize) }

// Stats counts what a Set did.
type Stats struct {
	Frames         uint64 // frame messages applied (each part of a continued frame counts)
	Skipped        uint64 // frame messages skipped: already covered by Seq
	Overlapping    uint64 // frames applied over a state past their first sequence (checksum before not checked)
	PagesWritten   uint64 // pages written by frames
	PagesLoaded    uint64 // pages written by LoadSnapshot
	UnwrittenPages uint64 // zero pages added without being written
}

// Set is every lane of one actor, as files in a scratch directory, and the
// sequence number they are at. It is not safe for concurrent use.
//
// A failure that leaves the Set half-changed (see ErrBroken) makes every
// later call fail; Close still closes the files. Errors that leave it
// unchanged (ErrGap, a broken chain detected before applying, a frame that
// cannot apply) leave it usable.
type Set struct {
	dir        string
	lanes      map[uint32]*laneFile
	seq        frames.Seq
	commitTime int64
	part       *partial // a continued frame whose last part has not come yet
	stats      Stats
	buf        []byte // coalesced pwrites
	err        error  // why the Set is unusable, nil while it is usable
}

// NewSet returns an empty Set (no lanes, Seq 0) keeping its files in dir,
// which must exist. Lane n's file is dir/lane-<n>.db; a Set refuses to
// create a file that already exists.
func NewSet(dir string) (*Set, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	if !fi.IsDir() {
		return nil, &Error{Op: "open", Err: fmt.Errorf("%s is not a directory", dir)}
	}
	return &Set{dir: dir, lanes: make(map[uint32]*laneFile)}, nil
}

// Dir returns the Set's directory.
func (s *Set) Dir() string { return s.dir }

// Seq returns the last sequence number applied: the Set holds the state
// after every frame through Seq (0: before the first).
func (s *Set) Seq() frames.Seq { return s.seq }

// CommitTime returns the commit time of frame Seq (Unix nanoseconds), 0 at
// Seq 0.
func (s *Set) CommitTime() int64 { return s.commitTime }

// Stats returns what the Set did so far.
func (s *Set) Stats() Stats { return s.stats }

// Lane returns lane n, if it exists.
func (s *Set) Lane(n uint32) (Lane, bool) {
	l, ok := s.lanes[n]
	if !ok {
		return Lane{}, false
	}
	return l.info(), true
}

// Tracker returns a copy of lane n's tracker, for a replicator that goes on
// from the state the Set restored without reading the file again. A lane
// of a lazy Set with chunks not loaded has no tracker to give (its table
// holds one term per such chunk, not page hashes): ok is false.
func (s *Set) Tracker(n uint32) (*Tracker, bool) {
	l, ok := s.lanes[n]
	if !ok || (l.lazy != nil && l.lazy.left > 0) {
		return nil, false
	}
	return l.t.Clone(), true
}

// Lanes returns every lane, ascending by number.
func (s *Set) Lanes() []Lane {
	out := make([]Lane, 0, len(s.lanes))
	for _, n := range s.laneNumbers() {
		out = append(out, s.lanes[n].info())
	}
	return out
}

func (s *Set) laneNumbers() []uint32 {
	nums := make([]uint32, 0, len(s.lanes))
	for n := range s.lanes {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums
}

// Err returns why the Set is unusable (matching ErrBroken), or nil.
func (s *Set) Err() error {
	if s.err == nil {
		return nil
	}
	if s.err == errClosed {
		return &problem{kind: ErrBroken, msg: "set is closed"}
	}
	return &broken{cause: s.err}
}

// usable returns an *Error for op when the Set is unusable.
func (s *Set) usable(op string) error {
	if err := s.Err(); err != nil {
		return &Error{Op: op, Err: err}
	}
	return nil
}

// fail records that the Set is half-changed by err and returns err.
func (s *Set) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return err
}

// idle reports an error when a continued frame is half applied: the files
// hold a state that no sequence number describes.
func (s *Set) idle(op string) error {
	if s.part != nil {
		return &Error{Op: op, FirstSeq: s.part.FirstSeq, LastSeq: s.part.LastSeq,
			Err: corrupt("a continued frame is half applied (its last part has not come)")}
	}
	return nil
}

func (s *Set) runBuffer() []byte {
	if s.buf == nil {
		s.buf = make([]byte, runBufferSize)
	}
	return s.buf
}

// Sync makes the lane files and the directory durable.
func (s *Set) Sync() error {
	if err := s.usable("sync"); err != nil {
		return err
	}
	for _, n := range s.laneNumbers() {
		l := s.lanes[n]
		if err := l.f.Sync(); err != nil {
			// After a failed fsync the kernel may have dropped the dirty
			// pages: nothing says what the file holds any more.
			return s.fail(&Error{Op: "sync", Err: fmt.Errorf("%s: %w", l.path, err)})
		}
	}
	if err := fsync.Dir(s.dir); err != nil {
		return s.fail(&Error{Op: "sync", Err: err})
	}
	return nil
}

// Close closes the lane files (without syncing them: see Sync) and leaves
// them in the directory. The Set is unusable afterwards.
func (s *Set) Close() error {
	if s.err == errClosed {
		return nil
	}
	var errs []error
	for _, n := range s.laneNumbers() {
		if err := s.lanes[n].f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.err = errClosed
	if err := errors.Join(errs...); err != nil {
		return &Error{Op: "close", Err: err}
	}
	return nil
}
