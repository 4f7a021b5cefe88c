package lanes

import (
	"fmt"
	"io"

	"github.com/framectl/framectl/frames"
)

// ReadPages reads len(dst) bytes, whole pages, of src's lane into dst,
// starting at page first, and checks every page against src.Tracker
// (ErrChecksum names the page), so that what a writer uploads is exactly
// the state tracked, as WriteSnapshot guarantees for a whole snapshot.
// Pages past the tracker's last page are an error.
//
// It only reads the tracker, so several goroutines may read pieces of one
// Source at once as long as nothing changes the tracker meanwhile.
func ReadPages(src Source, first uint32, dst []byte) error {
	fail := func(err error) error {
		return &Error{Op: "read pages", Err: fmt.Errorf("lane %d: %w", src.Lane, err)}
	}
	t := src.Tracker
	if t == nil || src.File == nil {
		return fail(fmt.Errorf("no tracker or no file"))
	}
	ps := uint64(t.pageSize)
	if ps == 0 || len(dst) == 0 || uint64(len(dst))%ps != 0 {
		return fail(corrupt("%d bytes is not a whole number of %d-byte pages", len(dst), ps))
	}
	n := uint64(len(dst)) / ps
	if first == 0 || uint64(first)-1+n > uint64(t.Pages()) {
		return fail(corrupt("pages %d..%d are outside the lane's %d pages", first, uint64(first)-1+n, t.Pages()))
	}
	off := int64(first-1) * int64(ps)
	if got, err := src.File.ReadAt(dst, off); got < len(dst) {
		if err == nil || err == io.EOF {
			return fail(checksumError("file ends at byte %d, the lane has %d pages of %d", off+int64(got), t.Pages(), ps))
		}
		return fail(err)
	}
	for i := range n {
		pgno := first + uint32(i)
		if h := frames.PageHash(pgno, dst[i*ps:(i+1)*ps]); h != t.pageHash(pgno) {
			// A page's hash is printed as the checksum it adds.
			return fail(checksumError("page %d: hash %s, tracked %s", pgno, frames.Checksum(h), frames.Checksum(t.pageHash(pgno))))
		}
	}
	return nil
}

// Sources returns every lane of the Set as a Source, for a writer of
// snapshots other than WriteSnapshot. They share the Set's trackers and
// files: use them only while the Set is unchanged and open.
func (s *Set) Sources() ([]Source, error) {
	if err := s.usable("sources"); err != nil {
		return nil, err
	}
	if err := s.idle("sources"); err != nil {
		return nil, err
	}
	out := make([]Source, 0, len(s.lanes))
	for _, n := range s.laneNumbers() {
		l := s.lanes[n]
		out = append(out, Source{Lane: n, Kind: l.kind, Tracker: &l.t, File: l.f})
	}
	return out, nil
}
