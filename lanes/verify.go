package lanes

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/framectl/framectl/frames"
)

// VerifyFiles reads every lane's file and checks it against what the Set
// tracked: its size, every page's hash, and the checksum recomputed from the
// file against the rolling one. In a lazy Set (NewLazySet) the pages of a
// chunk not loaded are not in the file: their terms are taken from the
// tracker. It catches a file changed behind the Set's
// back, a lost write, and a bug in the rolling checksum. A mismatch matches
// ErrChecksum and names the lane and the first page that differs.
func (s *Set) VerifyFiles(ctx context.Context) error {
	if err := s.usable("verify"); err != nil {
		return err
	}
	if err := s.idle("verify"); err != nil {
		return err
	}
	buf := make([]byte, copyBufferSize)
	for _, n := range s.laneNumbers() {
		l := s.lanes[n]
		if err := checkFileSize(l.f, &l.t); err != nil {
			return &Error{Op: "verify", Err: fmt.Errorf("lane %d (%s): %w", n, l.path, err)}
		}
		scan := scanLane
		if l.lazy != nil && l.lazy.left > 0 {
			scan = l.scanLazy
		}
		if err := scan(ctx, l.f, &l.t, buf, nil); err != nil {
			return &Error{Op: "verify", Err: fmt.Errorf("lane %d (%s): %w", n, l.path, err)}
		}
	}
	return nil
}

func checkFileSize(f *os.File, t *Tracker) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if want := int64(t.Pages()) * int64(t.pageSize); fi.Size() != want {
		return checksumError("file has %d bytes, the lane has %d pages of %d (%d bytes)", fi.Size(), t.Pages(), t.pageSize, want)
	}
	return nil
}

// scanLane reads a lane's Pages() pages from r, chunk by chunk through buf,
// checks each page's hash against the tracker's table and the XOR of them
// against its checksum, and hands each checked chunk to emit (when not nil).
// Bytes past the last page are not read.
func scanLane(ctx context.Context, r io.ReaderAt, t *Tracker, buf []byte, emit func([]byte) error) error {
	pages := t.Pages()
	if pages == 0 {
		if t.sum != 0 {
			return checksumError("empty lane has checksum %s", t.sum)
		}
		return nil
	}
	ps := int64(t.pageSize)
	per := int64(len(buf)) / ps
	var sum frames.Checksum
	for pgno := uint32(1); pgno <= pages; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(per, int64(pages-pgno)+1)
		chunk := buf[:n*ps]
		off := int64(pgno-1) * ps
		if got, err := r.ReadAt(chunk, off); got < len(chunk) {
			if err == nil || err == io.EOF {
				return checksumError("file ends at byte %d, the lane has %d pages of %d", off+int64(got), pages, ps)
			}
			return err
		}
		for i := int64(0); i < n; i++ {
			h := frames.PageHash(pgno, chunk[i*ps:(i+1)*ps])
			if h != t.pageHash(pgno) {
				// A page's hash is printed as the checksum it adds.
				return checksumError("page %d: hash %s, tracked %s", pgno, frames.Checksum(h), frames.Checksum(t.pageHash(pgno)))
			}
			sum ^= frames.Checksum(h)
			pgno++
		}
		if emit != nil {
			if err := emit(chunk); err != nil {
				return err
			}
		}
	}
	if sum != t.sum {
		return checksumError("pages hash to checksum %s, the rolling checksum is %s", sum, t.sum)
	}
	return nil
}
