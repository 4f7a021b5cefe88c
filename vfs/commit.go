package vfs

import (
	"sync"

	"github.com/framectl/framectl/frames"
)

// Commit is one committed WAL transaction as the capture saw it: the newest
// version of every page the transaction wrote, and the database size after
// it. The capture hands each commit to a sink exactly once, in commit order,
// and never a page of a rolled-back transaction.
type Commit struct {
	PageSize      uint32
	DatabasePages uint32        // database size in pages after the commit
	Pages         []frames.Page // strictly ascending numbers, each <= DatabasePages
	// CommitTime is the wall clock when the capture saw the commit frame
	// (Unix nanoseconds).
	CommitTime int64

	pool *pagePool
}

// Release returns the commit's page buffers, and the commit itself, for
// reuse. The commit must not be used afterwards; a second Release is a
// no-op.
func (c *Commit) Release() {
	pp := c.pool
	if pp != nil {
		for i := range c.Pages {
			pp.put(c.Pages[i].Data)
			c.Pages[i].Data = nil
		}
	}
	c.Pages = c.Pages[:0]
	if pp != nil {
		c.pool = nil
		pp.putCommit(c)
	}
}

// sink receives what the capture sees of one database. Both methods run on
// SQLite's goroutine, inside VFS callbacks, with no context: they must not
// block on the network unless the mode says so.
type sink interface {
	// writable is called before every write to the WAL. A non-nil error
	// refuses the write (SQLite reports an I/O error and the transaction
	// fails), so a database whose replication has stopped takes no commit
	// it could not ship.
	writable() error
	// commit receives a commit, in order, while SQLite holds the WAL write
	// lock. The commit is already in the local WAL when this runs; the sink
	// owns it and must Release it when done.
	commit(c *Commit)
	// broken reports that the capture met a write it cannot account for
	// (a gap in the WAL, a foreign writer, a malformed header). Replication
	// must stop: the bucket would otherwise diverge from the database.
	broken(err error)
}

// pagePool recycles page buffers of one size, and Commit values, so a
// steady stream of commits allocates nothing. It keeps at most maxFree
// buffers; the rest go to the GC.
type pagePool struct {
	size    int
	maxFree int
	mu      sync.Mutex
	free    [][]byte
	commits []*Commit // released, with their Pages capacity
	made    int       // buffers allocated (tests check reuse)
}

// maxFreeCommits bounds the released Commit values kept: commits in flight
// at once (between capture and Release) are few.
const maxFreeCommits = 64

func newPagePool(size, maxFree int) *pagePool {
	return &pagePool{size: size, maxFree: maxFree}
}

func (pp *pagePool) get() []byte {
	pp.mu.Lock()
	if n := len(pp.free); n > 0 {
		b := pp.free[n-1]
		pp.free = pp.free[:n-1]
		pp.mu.Unlock()
		return b
	}
	pp.made++
	pp.mu.Unlock()
	return make([]byte, pp.size)
}

// getCommit returns an empty Commit whose Release returns to pp.
func (pp *pagePool) getCommit() *Commit {
	pp.mu.Lock()
	if n := len(pp.commits); n > 0 {
		c := pp.commits[n-1]
		pp.commits = pp.commits[:n-1]
		pp.mu.Unlock()
		c.pool = pp
		return c
	}
	pp.mu.Unlock()
	return &Commit{pool: pp}
}

func (pp *pagePool) putCommit(c *Commit) {
	pp.mu.Lock()
	if len(pp.commits) < maxFreeCommits {
		*c = Commit{Pages: c.Pages[:0]}
		pp.commits = append(pp.commits, c)
	}
	pp.mu.Unlock()
}

func (pp *pagePool) put(b []byte) {
	if cap(b) < pp.size {
		return
	}
	pp.mu.Lock()
	if len(pp.free) < pp.maxFree {
		pp.free = append(pp.free, b[:pp.size])
	}
	pp.mu.Unlock()
}
