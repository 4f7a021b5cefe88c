package capture

import (
	"context"
	"fmt"
	"io"
	"time"
)

// PageSource supplies the pages of an attached database that its local
// file does not hold yet: a database served while it is fetched from the
// bucket (a lazy open), a read replica. It is the seam between the SQLite
// side, which only knows that a page is missing, and whoever knows where
// the page is (a chunk of a manifest, a batch of the log).
//
// With a source (Options.Pages) the capture asks it about every page a read
// of the main database file touches: a page the local file holds is read
// from the file, any other from the source. Reads of the WAL never involve
// it: a page in the WAL is newer than anything the source has. The local
// file keeps the database's size, sparse where pages are missing, so that
// SQLite's xFileSize stays true.
//
// A source must be safe for concurrent use: every connection to the
// database reads through it.
type PageSource interface {
	// Local reports whether the local file holds page pgno (1-based) as
	// the database now is. It is called for every page read, on SQLite's
	// goroutine: it must answer at once, without I/O.
	Local(pgno uint32) bool
	// ReadPage fills p, exactly one page, with page pgno. It may block on
	// a fetch, until ctx ends: VFS callbacks carry no context, so the
	// capture gives it one that ends after Options.PageTimeout. An error
	// fails the read, and the statement with it: it should name what it
	// could not read (the object key, and why), and may carry a Reason
	// (Refuse) for the application to tell it apart (ReasonOf); without one
	// the statement fails with SQLITE_IOERR_READ.
	ReadPage(ctx context.Context, pgno uint32, p []byte) error
	// Stored tells the source that the capture wrote page pgno into the
	// local file (a checkpoint copying the WAL back): from now on the file
	// holds the page's newest version, and Local must say so. It is called
	// after the write, before the checkpoint completes, with no lock held.
	Stored(pgno uint32)
}

// fetchPage asks src for page pgno, waiting at most timeout.
func fetchPage(src PageSource, pgno uint32, p []byte, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := src.ReadPage(ctx, pgno, p); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("page %d: not fetched within %v: %w", pgno, timeout, err)
		}
		return fmt.Errorf("page %d: %w", pgno, err)
	}
	return nil
}

// readPages serves a read of the main database file of an attached
// database with a page source: page by page, from the file where it holds
// the page, from the source otherwise. SQLite reads whole pages, except the
// first 100 bytes of page 1 (the header, sqlite3PagerReadFileheader);
// any part of a page is served from the whole page.
func (m *mainFile) readPages(p []byte, off int64) (int, error) {
	st := m.st
	ps := int64(st.pageSize)
	done := 0
	for done < len(p) {
		at := off + int64(done)
		pgno := uint32(at/ps) + 1
		in := int(at % ps)
		n := min(len(p)-done, int(ps)-in)
		if st.pages.Local(pgno) {
			k, err := m.File.ReadAt(p[done:done+n], at)
			done += k
			if err != nil {
				return done, err // io.EOF past the end: SQLite zero-fills a short read
			}
			continue
		}
		dst := p[done : done+n]
		if in != 0 || n != int(ps) {
			if m.scratch == nil {
				m.scratch = make([]byte, ps)
			}
			dst = m.scratch
		}
		if err := fetchPage(st.pages, pgno, dst, st.pageTimeout); err != nil {
			return done, readError(&captureError{Path: st.dbPath, Kind: errPageSource, Err: err})
		}
		if in != 0 || n != int(ps) {
			copy(p[done:done+n], m.scratch[in:])
		}
		done += n
	}
	return done, nil
}

// stored tells the page source about the pages a write of len bytes at off
// put into the local file.
func (st *walState) stored(off int64, n int) {
	if st.pages == nil || n <= 0 {
		return
	}
	ps := int64(st.pageSize)
	for pg := off / ps; pg*ps < off+int64(n); pg++ {
		st.pages.Stored(uint32(pg) + 1)
	}
}

var _ io.ReaderAt = (*mainFile)(nil)
