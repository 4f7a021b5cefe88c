package peer

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"slices"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// Part of the wire format (doc.go, "Frames"): never change these.
const (
	lengthBytes    = 4
	headerMACBytes = 16
	headerBytes    = lengthBytes + headerMACBytes
	macBytes       = sha256.Size
	macHeader      = 1 // what the header MAC covers starts with this byte
	macFrame       = 2 // and the frame's MAC with this one
)

// Buffer sizes: tuned for memory, not measured for speed; a frame's bytes
// are read and written in pieces of these sizes whatever its length.
const (
	readBufferBytes = 16 << 10
	// firstChunkBytes is the most a frame's length can make Receive
	// allocate before that many bytes arrived: the buffer then doubles
	// with the bytes received, never to what the length claims at once.
	firstChunkBytes = 16 << 10
	// keepBufferBytes: a read buffer grown past this for one large frame
	// is let go after it, so an idle connection holds little.
	keepBufferBytes = 1 << 20
	// writeChunkBytes is one write call, each with its own stall deadline.
	writeChunkBytes = 64 << 10
)

// Conn is one authenticated connection with a peer, made by Client or
// Server: a stream of frames each way, each an encoded follow message
// under a MAC (doc.go, "Frames"). One goroutine may Receive while another
// Sends; Close may be called from any.
type Conn struct {
	c          net.Conn
	br         *bufio.Reader
	peer       follow.NodeID
	addr       string
	lim        follow.Limits
	maxMessage int64
	stall      time.Duration

	recvMAC hash.Hash
	recvSeq uint64
	rbuf    []byte
	rerr    error

	sendMAC hash.Hash
	sendSeq uint64
	wbuf    []byte
	werr    error
}

func newConn(c net.Conn, br *bufio.Reader, s *settings, peer follow.NodeID, sendKey, recvKey []byte) *Conn {
	return &Conn{
		c: c, br: br, peer: peer, addr: remoteAddr(c), lim: s.lim, maxMessage: s.maxMessage, stall: s.stall,
		recvMAC: hmac.New(sha256.New, recvKey), sendMAC: hmac.New(sha256.New, sendKey),
	}
}

// Peer is the node at the other end, as the handshake proved it.
func (c *Conn) Peer() follow.NodeID { return c.peer }

// RemoteAddr is the other end's network address.
func (c *Conn) RemoteAddr() string { return c.addr }

// Close closes the connection; a Receive or Send blocked on it returns.
func (c *Conn) Close() error { return c.c.Close() }

// Receive reads the next frame and returns its message, once its length is
// within the message bound, its MAC verifies (it is the peer's next frame,
// unaltered) and its bytes decode as a follow message. A peer that closed
// between frames is io.EOF; anything else is a *ConnError (see ConnError
// for what it matches). After an error every call returns it: the stream
// cannot be trusted past a frame that failed, so close the Conn.
func (c *Conn) Receive() (follow.Message, error) {
	if c.rerr != nil {
		return nil, c.rerr
	}
	m, err := c.receive()
	if err != nil {
		if err != io.EOF {
			err = &ConnError{Op: "receive", Addr: c.addr, Peer: c.peer, Err: err}
		}
		c.rerr = err
		return nil, err
	}
	return m, nil
}

func (c *Conn) receive() (follow.Message, error) {
	seq := c.recvSeq
	var hdr [headerBytes]byte
	if n, err := io.ReadFull(c.br, hdr[:]); err != nil {
		switch {
		case n == 0 && err == io.EOF:
			return nil, io.EOF
		case err == io.ErrUnexpectedEOF:
			return nil, fmt.Errorf("frame %d header: the stream ended after %d of %d bytes: %w", seq, n, headerBytes, frames.ErrTruncated)
		}
		return nil, fmt.Errorf("frame %d header: %w", seq, err)
	}
	length := hdr[:lengthBytes]
	// The length is checked before anything is read for it: a length
	// altered on the wire fails here, not after the bytes it claims.
	if !hmac.Equal(hdr[lengthBytes:], headerMAC(c.recvMAC, seq, length)) {
		return nil, fmt.Errorf("frame %d header: MAC does not verify: altered, replayed, reordered or cut on the wire: %w", seq, ErrAuth)
	}
	n := int64(binary.LittleEndian.Uint32(length))
	if n > c.maxMessage {
		return nil, fmt.Errorf("frame %d: %d bytes, past the message bound of %d: %w", seq, n, c.maxMessage, frames.ErrTooLarge)
	}
	payload, err := c.readPayload(int(n), seq)
	if err != nil {
		return nil, err
	}
	var tag [macBytes]byte
	if err := readFull(c.br, tag[:], fmt.Sprintf("frame %d MAC", seq)); err != nil {
		return nil, err
	}
	if !hmac.Equal(tag[:], frameMAC(c.recvMAC, seq, length, payload)) {
		return nil, fmt.Errorf("frame %d of %d bytes: MAC does not verify: altered on the wire: %w", seq, n, ErrAuth)
	}
	c.recvSeq++
	m, err := follow.DecodeMessage(payload, string(c.peer), c.lim)
	if cap(c.rbuf) > keepBufferBytes {
		c.rbuf = nil
	}
	if err != nil {
		return nil, fmt.Errorf("frame %d: %w", seq, err)
	}
	return m, nil
}

// readPayload reads n bytes into c.rbuf, growing it with the bytes that
// arrive rather than to n at once.
func (c *Conn) readPayload(n int, seq uint64) ([]byte, error) {
	buf := c.rbuf[:0]
	for len(buf) < n {
		step := min(n-len(buf), max(len(buf), firstChunkBytes))
		buf = slices.Grow(buf, step)
		if err := readFull(c.br, buf[len(buf):len(buf)+step], fmt.Sprintf("frame %d of %d bytes", seq, n)); err != nil {
			c.rbuf = buf[:0]
			return nil, err
		}
		buf = buf[:len(buf)+step]
	}
	c.rbuf = buf[:0]
	return buf, nil
}

// headerMAC is the first 16 bytes of HMAC-SHA256 under the direction's
// key over 1, the frame's sequence number and its length field.
func headerMAC(m hash.Hash, seq uint64, length []byte) []byte {
	return macOf(m, macHeader, seq, length, nil)[:headerMACBytes]
}

// frameMAC is HMAC-SHA256 under the direction's key over 2, the frame's
// sequence number, its length field and its payload.
func frameMAC(m hash.Hash, seq uint64, length, payload []byte) []byte {
	return macOf(m, macFrame, seq, length, payload)
}

func macOf(m hash.Hash, label byte, seq uint64, length, payload []byte) []byte {
	m.Reset()
	var s [9]byte
	s[0] = label
	binary.LittleEndian.PutUint64(s[1:], seq)
	m.Write(s[:])
	m.Write(length)
	m.Write(payload)
	return m.Sum(nil)
}

// Send writes m as the next frame. Only one goroutine may Send at a time.
// A message follow refuses to encode is ErrInvalid, and the Conn stays
// usable; after a write fails every call returns that *ConnError.
func (c *Conn) Send(m follow.Message) error {
	payload, err := follow.AppendMessage(nil, m, c.lim)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c.sendPayload(payload)
}

// sendPayload writes an encoded message as the next frame.
func (c *Conn) sendPayload(payload []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if int64(len(payload)) > c.maxMessage {
		return fmt.Errorf("%w: a message of %d bytes, past the message bound of %d", ErrInvalid, len(payload), c.maxMessage)
	}
	var hdr [headerBytes]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(payload)))
	copy(hdr[lengthBytes:], headerMAC(c.sendMAC, c.sendSeq, hdr[:lengthBytes]))
	tag := frameMAC(c.sendMAC, c.sendSeq, hdr[:lengthBytes], payload)
	var err error
	if len(payload) <= writeChunkBytes {
		c.wbuf = append(append(append(c.wbuf[:0], hdr[:]...), payload...), tag...)
		err = c.write(c.wbuf)
	} else if err = c.write(hdr[:]); err == nil {
		if err = c.write(payload); err == nil {
			err = c.write(tag)
		}
	}
	if err != nil {
		c.werr = &ConnError{Op: "send", Addr: c.addr, Peer: c.peer, Err: fmt.Errorf("frame %d of %d bytes: %w", c.sendSeq, len(payload), err)}
		return c.werr
	}
	c.sendSeq++
	return nil
}

// write writes b in pieces, each of which must go within the stall
// timeout: a peer that stops reading ends the connection rather than hold
// the writer forever.
func (c *Conn) write(b []byte) error {
	for len(b) > 0 {
		piece := b[:min(len(b), writeChunkBytes)]
		if c.stall > 0 {
			if err := c.c.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
				return err
			}
		}
		n, err := c.c.Write(piece)
		b = b[n:]
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("connection closed: %w", err)
			}
			return err
		}
	}
	return nil
}
