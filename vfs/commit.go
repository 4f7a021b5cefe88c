package vfs

import (
	"sync"

	"github.com/framectl/framectl/frames"
)

// capturedCommit is one committed WAL transaction as the capture saw it:
// the newest version of every page the transaction wrote, and the database
// size after it. The capture hands each commit to a sink exactly once, in
// commit order, and never a page of a rolled-back transaction.
type capturedCommit struct {
	PageSize      uint32
	DatabasePages uint32        // database size in pages after the commit
	Pages         []frames.Page // strictly ascending numbers, each <= DatabasePages
	// CommitTime is the wall clock when the capture saw the commit WAL frame
	// (Unix nanoseconds).
	CommitTime int64

	pool *pagePool
}

// release returns the commit's page buffers, and the commit itself, for
// reuse. The commit must not be used afterwards; a second release is a
// no-op.
func (c *capturedCommit) release() {
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

// pagePool recycles page buffers of one size, and capturedCommit values,
// so a steady stream of commits allocates nothing. It keeps at most maxFree
// buffers; the rest go to the GC.
type pagePool struct {
	size    int
	maxFree int
	mu      sync.Mutex
	free    [][]byte
	commits []*capturedCommit // released, with their Pages capacity
	made    int               // buffers allocated (tests check reuse)
}

// maxFreeCommits bounds the released capturedCommit values kept: commits
// in flight at once (between capture and release) are few.
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

// getCommit returns an empty capturedCommit whose release returns to pp.
func (pp *pagePool) getCommit() *capturedCommit {
	pp.mu.Lock()
	if n := len(pp.commits); n > 0 {
		c := pp.commits[n-1]
		pp.commits = pp.commits[:n-1]
		pp.mu.Unlock()
		c.pool = pp
		return c
	}
	pp.mu.Unlock()
	return &capturedCommit{pool: pp}
}

func (pp *pagePool) putCommit(c *capturedCommit) {
	pp.mu.Lock()
	if len(pp.commits) < maxFreeCommits {
		*c = capturedCommit{Pages: c.Pages[:0]}
		pp.commits = append(pp.commits, c)
	}
	pp.mu.Unlock()
}

// trim drops all but keep free page buffers, and the released commits'
// page lists: what a large transaction left behind, once the database is
// idle.
func (pp *pagePool) trim(keep int) {
	pp.mu.Lock()
	if len(pp.free) > keep {
		pp.free = append([][]byte(nil), pp.free[:keep]...)
	}
	pp.commits = nil
	pp.mu.Unlock()
}

// freeBytes is the bytes of the free page buffers.
func (pp *pagePool) freeBytes() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return len(pp.free) * pp.size
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
