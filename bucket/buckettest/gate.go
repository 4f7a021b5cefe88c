package buckettest

import (
	"context"
	"io"
	"sync"

	"github.com/framectl/framectl/bucket"
)

// Gate wraps a bucket and holds the Puts of the keys it matches while it
// is held: a test holds it to make uploads pile up (commits merge into one
// batch, a backlog fills, a crash finds commits not uploaded) and releases
// it to let them through. Every other call passes straight through. A Gate
// starts released; it is safe for concurrent use.
type Gate struct {
	bucket.Bucket
	match   func(key string) bool
	waiting chan struct{}

	mu   sync.Mutex
	held chan struct{} // closed by Release; nil while released
}

// NewGate wraps b; match says which keys' Puts the gate holds.
func NewGate(b bucket.Bucket, match func(key string) bool) *Gate {
	return &Gate{Bucket: b, match: match, waiting: make(chan struct{}, 1)}
}

// Hold makes the Puts of matching keys wait from now on, until Release.
func (g *Gate) Hold() {
	g.mu.Lock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
	g.mu.Unlock()
}

// Release lets every held Put through, and the ones after it.
func (g *Gate) Release() {
	g.mu.Lock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
	g.mu.Unlock()
}

// Waiting receives when a Put starts to wait at the gate (one signal is
// kept until it is received).
func (g *Gate) Waiting() <-chan struct{} { return g.waiting }

// Put waits while the gate is held and key matches (or until ctx ends),
// then puts into the inner bucket.
func (g *Gate) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if g.match(key) {
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		if held != nil {
			select {
			case g.waiting <- struct{}{}:
			default:
			}
			select {
			case <-held:
			case <-ctx.Done():
				return bucket.Info{}, &bucket.Error{Op: "put", Key: key, Err: ctx.Err()}
			}
		}
	}
	return g.Bucket.Put(ctx, key, body, size, cond)
}
