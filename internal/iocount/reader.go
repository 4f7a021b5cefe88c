// Package iocount owns counting the bytes that pass through a reader: the
// bytes-read figures of restores, verifications, chunk loads and
// compaction passes. It never buffers, and never changes what passes or
// the errors that come with it.
package iocount

import (
	"io"
	"sync/atomic"
)

// Reader reads from another reader and adds the bytes each Read returned
// to a counter, which many Readers may share (the workers of one load
// count into one total).
type Reader struct {
	r io.Reader
	n *atomic.Int64
}

// NewReader returns a Reader of r counting into n, or into a counter of
// its own when n is nil.
func NewReader(r io.Reader, n *atomic.Int64) *Reader {
	if n == nil {
		n = new(atomic.Int64)
	}
	return &Reader{r: r, n: n}
}

func (c *Reader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Count returns what the counter holds: the bytes read through every
// Reader counting into it.
func (c *Reader) Count() int64 { return c.n.Load() }
