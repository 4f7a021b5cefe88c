// Package conntap owns a net.Conn wrapper for tests that keeps a copy of
// every byte written through it, so that a test can read back what one
// end of a real connection sent (a handshake's transcript, a frame). It
// changes nothing that passes through, and it must never be imported
// outside a _test.go file.
package conntap

import (
	"bytes"
	"net"
	"sync"
)

// Conn is a net.Conn that keeps a copy of what is written to it. Reads and
// everything but Write go straight to the embedded Conn.
type Conn struct {
	net.Conn
	mu    sync.Mutex
	wrote bytes.Buffer
}

// Write keeps a copy of b, then writes it to the embedded Conn.
func (c *Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.wrote.Write(b)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// Written returns a copy of everything written so far (since the last
// Take).
func (c *Conn) Written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.wrote.Bytes())
}

// Take returns what Written returns and forgets it, so that the next call
// returns only what is written after this one.
func (c *Conn) Take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := bytes.Clone(c.wrote.Bytes())
	c.wrote.Reset()
	return b
}
