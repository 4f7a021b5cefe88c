package capture

// Pages a local file lacks: an attached database may have a page source
// (Options.Pages, a captured.PageSource, whose doc is the contract), and
// then every read of its main file goes page by page to the file or to the
// source.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/framectl/framectl/internal/captured"
)

// fetchPage asks src for page pgno, waiting at most timeout.
func fetchPage(src captured.PageSource, pgno uint32, p []byte, timeout time.Duration) error {
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
