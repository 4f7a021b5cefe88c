package session

import (
	"slices"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/captured"
)

// pendingBatch is a run of commits merged into one frame: the newest
// version of every page written in first..last, and the database size and
// checksum after last. A hundred updates of one row hold one page.
type pendingBatch struct {
	first, last   frames.Seq
	commitTime    int64     // of last
	firstTime     time.Time // when the first commit was captured
	commits       int
	pageSize      uint32
	before, after frames.Checksum // set when the uploader seals the batch, or by the shipper
	presealed     bool            // before and after set by the shipper (peer mode)
	dbPages       uint32
	pages         map[uint32][]byte // page number -> newest content (buffers from pool)
	bytes         int64             // page bytes held
	rawBytes      int64             // page bytes captured, before merging
	pool          *captured.Pool
}

// add merges a commit (seq) into the batch, taking ownership of its page
// buffers. prevPages is the database size before the commit.
func (b *pendingBatch) add(seq frames.Seq, c *captured.Commit, prevPages uint32) {
	if b.commits == 0 {
		b.first = seq
		b.firstTime = time.Now()
	}
	for i := range c.Pages {
		p := &c.Pages[i]
		if old, ok := b.pages[p.Number]; ok {
			b.pool.Put(old)
		} else {
			b.bytes += int64(b.pageSize)
		}
		b.pages[p.Number] = p.Data
		b.rawBytes += int64(b.pageSize)
		p.Data = nil
	}
	switch {
	case c.DatabasePages < prevPages:
		// Pages cut off by this commit must not be replayed by the merged
		// frame (frames carry no page past their database size).
		for n, data := range b.pages {
			if n > c.DatabasePages {
				b.pool.Put(data)
				delete(b.pages, n)
				b.bytes -= int64(b.pageSize)
			}
		}
	case c.DatabasePages > prevPages:
		// Growth the commit did not write reads as zeros. SQLite writes
		// every page it allocates, so this is not expected; but if it
		// happens after a truncation earlier in the run, an older version
		// of the page may still sit in the batch, and replay must see the
		// zeros instead.
		for n := prevPages + 1; n <= c.DatabasePages; n++ {
			if _, found := slices.BinarySearchFunc(c.Pages, n, func(p frames.Page, n uint32) int { return int(p.Number) - int(n) }); found {
				continue
			}
			buf := b.pool.Get()
			clear(buf)
			if old, ok := b.pages[n]; ok {
				b.pool.Put(old)
			} else {
				b.bytes += int64(b.pageSize)
			}
			b.pages[n] = buf
		}
	}
	b.last = seq
	b.commitTime = c.CommitTime
	b.dbPages = c.DatabasePages
	b.commits++
}

// frame returns the batch as one frame of epoch, pages sorted. The page
// data aliases the batch's buffers.
func (b *pendingBatch) frame(epoch frames.Epoch, scratch []frames.Page) frames.Frame {
	pages := scratch[:0]
	for n, data := range b.pages {
		pages = append(pages, frames.Page{Number: n, Data: data})
	}
	slices.SortFunc(pages, func(x, y frames.Page) int { return int(x.Number) - int(y.Number) })
	return frames.Frame{
		Epoch: epoch, FirstSeq: b.first, LastSeq: b.last, Lane: 0, CommitTime: b.commitTime,
		Kind:   frames.KindSQLitePages,
		SQLite: frames.SQLitePages{PageSize: b.pageSize, DatabasePages: b.dbPages, Pages: pages},
	}
}

// release returns every page buffer to the pool.
func (b *pendingBatch) release() {
	for n, data := range b.pages {
		b.pool.Put(data)
		delete(b.pages, n)
	}
	b.bytes = 0
}
