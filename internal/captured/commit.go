// Package captured owns what crosses between the SQLite adapter (package
// capture) and the layer above it (the replication session): one committed
// transaction's pages, the pool their buffers come from and go back to,
// the Sink that receives them, and the PageSource the adapter reads the
// pages a local file lacks from. It is the contract between the two
// layers, so that neither imports the other: it knows nothing of SQLite's
// files, nor of buckets.
//
// What it must never do: hold a page buffer after it was released, or
// hand one buffer to two holders.
package captured

import (
	"sync"

	"github.com/framectl/framectl/frames"
)

// Commit is one committed WAL transaction as the capture saw it: the newest
// version of every page the transaction wrote, and the database size after
// it. The capture hands each commit to a Sink exactly once, in commit order,
// and never a page of a rolled-back transaction.
type Commit struct {
	PageSize      uint32
	DatabasePages uint32        // database size in pages after the commit
	Pages         []frames.Page // strictly ascending numbers, each <= DatabasePages
	// CommitTime is the wall clock when the capture saw the commit WAL frame
	// (Unix nanoseconds).
	CommitTime int64

	pool *Pool
}

// Pool is the pool the commit's page buffers came from, nil for a commit
// made outside one: a holder that keeps a page buffer past Release (a batch
// merging commits) returns it there with Put once done with it.
func (c *Commit) Pool() *Pool { return c.pool }

// Release returns the commit's page buffers, and the commit itself, for
// reuse. The commit must not be used afterwards; a second Release is a
// no-op. A holder that took a page buffer out of Pages (setting its Data to
// nil) owns that buffer.
func (c *Commit) Release() {
	pp := c.pool
	if pp != nil {
		for i := range c.Pages {
			pp.Put(c.Pages[i].Data)
			c.Pages[i].Data = nil
		}
	}
	c.Pages = c.Pages[:0]
	if pp != nil {
		c.pool = nil
		pp.putCommit(c)
	}
}

// Pool recycles page buffers of one size, and Commit values, so a steady
// stream of commits allocates nothing. It keeps at most maxFree buffers;
// the rest go to the GC. It is safe for concurrent use.
type Pool struct {
	size    int
	maxFree int
	mu      sync.Mutex
	free    [][]byte
	commits []*Commit // released, with their Pages capacity
	made    int       // buffers allocated (tests check reuse)
}

// maxFreeCommits bounds the released Commit values kept: commits in flight
// at once (between capture and release) are few.
const maxFreeCommits = 64

// NewPool returns a pool of buffers of size bytes that keeps up to maxFree
// free buffers.
func NewPool(size, maxFree int) *Pool {
	return &Pool{size: size, maxFree: maxFree}
}

// Size is the size of the pool's buffers: the database's page size.
func (pp *Pool) Size() int { return pp.size }

// Get returns a buffer of Size bytes, reused or new; its content is
// whatever it held before.
func (pp *Pool) Get() []byte {
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

// Put returns a buffer for reuse. A buffer smaller than Size is dropped.
func (pp *Pool) Put(b []byte) {
	if cap(b) < pp.size {
		return
	}
	pp.mu.Lock()
	if len(pp.free) < pp.maxFree {
		pp.free = append(pp.free, b[:pp.size])
	}
	pp.mu.Unlock()
}

// NewCommit returns an empty Commit whose Release returns to pp.
func (pp *Pool) NewCommit() *Commit {
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

func (pp *Pool) putCommit(c *Commit) {
	pp.mu.Lock()
	if len(pp.commits) < maxFreeCommits {
		*c = Commit{Pages: c.Pages[:0]}
		pp.commits = append(pp.commits, c)
	}
	pp.mu.Unlock()
}

// Trim drops all but keep free page buffers, and the released commits'
// page lists: what a large transaction left behind, once the database is
// idle.
func (pp *Pool) Trim(keep int) {
	pp.mu.Lock()
	if len(pp.free) > keep {
		pp.free = append([][]byte(nil), pp.free[:keep]...)
	}
	pp.commits = nil
	pp.mu.Unlock()
}

// FreeBytes is the bytes of the free page buffers.
func (pp *Pool) FreeBytes() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return len(pp.free) * pp.size
}

// Made is how many buffers the pool has allocated so far.
func (pp *Pool) Made() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.made
}
