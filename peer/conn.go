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
	"sync"
	"sync/atomic"
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
	// actorLengthBytes is the actor's length in front of a payload: one
	// byte, as follow.MaxActorBytes allows.
	actorLengthBytes = 1
	// maxActorPrefix is the most a payload carries besides its message.
	maxActorPrefix = actorLengthBytes + follow.MaxActorBytes
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
// Server: a stream of frames each way, each an actor's name and an encoded
// follow message under a MAC (doc.go, "Frames"). One goroutine may Receive
// while another Sends; Close may be called from any.
type Conn struct {
	c          net.Conn
	br         *bufio.Reader
	peer       follow.FollowerID
	addr       string
	lim        follow.Limits
	maxPayload int64
	stall      time.Duration

	recvMAC hash.Hash
	recvSeq uint64
	rbuf    []byte
	rerr    error

	wmu     sync.Mutex // one writer at a time: the sender, the heartbeat
	sendMAC hash.Hash
	sendSeq uint64
	wbuf    []byte
	werr    error

	// lastWrite is when a frame last went (UnixNano): a heartbeat is
	// sent only on a connection that has carried nothing for a beat.
	lastWrite atomic.Int64
	// held: the reader holds a message it cannot hand on (the Handler's
	// queue is full), so the peer's silence is this node's, not its own
	// (hearing.go).
	held atomic.Bool
}

func newConn(c net.Conn, br *bufio.Reader, s *settings, peer follow.FollowerID, sendKey, recvKey []byte) *Conn {
	return &Conn{
		c: c, br: br, peer: peer, addr: remoteAddr(c), lim: s.lim, maxPayload: s.maxPayload, stall: s.stall,
		recvMAC: hmac.New(sha256.New, recvKey), sendMAC: hmac.New(sha256.New, sendKey),
	}
}

// Peer is the node at the other end, as the handshake proved it.
func (c *Conn) Peer() follow.FollowerID { return c.peer }

// RemoteAddr is the other end's network address.
func (c *Conn) RemoteAddr() string { return c.addr }

// Close closes the connection; a Receive or Send blocked on it returns.
func (c *Conn) Close() error { return c.c.Close() }

// Receive reads the next frame that carries a message and returns the
// actor it names and its message, once its length is within the frame
// bound, its MAC verifies (it is the peer's next frame, unaltered), its
// actor's length is 1 to follow.MaxActorBytes within the payload and the
// rest decodes as a follow message. Control frames (heartbeats, and the
// questions of doc.go's "Control frames") are checked the same way and
// passed over: answering them is Node's. A peer that closed between
// frames is io.EOF; anything else is a *ConnError (see ConnError for what
// it matches). After an error every call returns it: the stream cannot be
// trusted past a frame that failed, so close the Conn.
func (c *Conn) Receive() (actor string, m follow.Message, err error) {
	for {
		f, err := c.next()
		if err != nil {
			return "", nil, err
		}
		if f.m != nil {
			return f.actor, f.m, nil
		}
	}
}

// frame is what one frame carried: an actor's message, or a control.
type frame struct {
	actor string
	m     follow.Message // nil: a control frame
	ctl   control
	size  int64 // the payload's bytes, as a dispatch queue counts them
}

// next reads the next frame, of either kind.
func (c *Conn) next() (frame, error) {
	if c.rerr != nil {
		return frame{}, c.rerr
	}
	f, err := c.receive()
	if err != nil {
		if err != io.EOF {
			err = &ConnError{Op: "receive", Addr: c.addr, Peer: c.peer, Err: err}
		}
		c.rerr = err
		return frame{}, err
	}
	return f, nil
}

func (c *Conn) receive() (frame, error) {
	seq := c.recvSeq
	var hdr [headerBytes]byte
	if n, err := io.ReadFull(c.br, hdr[:]); err != nil {
		switch {
		case n == 0 && err == io.EOF:
			return frame{}, io.EOF
		case err == io.ErrUnexpectedEOF:
			return frame{}, fmt.Errorf("frame %d header: the stream ended after %d of %d bytes: %w", seq, n, headerBytes, frames.ErrTruncated)
		}
		return frame{}, fmt.Errorf("frame %d header: %w", seq, err)
	}
	length := hdr[:lengthBytes]
	// The length is checked before anything is read for it: a length
	// altered on the wire fails here, not after the bytes it claims.
	if !hmac.Equal(hdr[lengthBytes:], headerMAC(c.recvMAC, seq, length)) {
		return frame{}, fmt.Errorf("frame %d header: MAC does not verify: altered, replayed, reordered or cut on the wire: %w", seq, ErrAuth)
	}
	n := int64(binary.LittleEndian.Uint32(length))
	if n > c.maxPayload {
		return frame{}, fmt.Errorf("frame %d: %d bytes, past the frame bound of %d: %w", seq, n, c.maxPayload, frames.ErrTooLarge)
	}
	payload, err := c.readPayload(int(n), seq)
	if err != nil {
		return frame{}, err
	}
	var tag [macBytes]byte
	if err := readFull(c.br, tag[:], fmt.Sprintf("frame %d MAC", seq)); err != nil {
		return frame{}, err
	}
	if !hmac.Equal(tag[:], frameMAC(c.recvMAC, seq, length, payload)) {
		return frame{}, fmt.Errorf("frame %d of %d bytes: MAC does not verify: altered on the wire: %w", seq, n, ErrAuth)
	}
	c.recvSeq++
	if cap(c.rbuf) > keepBufferBytes {
		c.rbuf = nil
	}
	if len(payload) > 0 && payload[0] == 0 {
		ctl, err := parseControl(payload)
		if err != nil {
			return frame{}, fmt.Errorf("frame %d of %d bytes: %w", seq, n, err)
		}
		return frame{ctl: ctl}, nil
	}
	actor, body, err := splitActor(payload)
	if err != nil {
		return frame{}, fmt.Errorf("frame %d of %d bytes: %w", seq, n, err)
	}
	m, err := follow.DecodeMessage(body, string(c.peer), c.lim)
	if err != nil {
		return frame{}, fmt.Errorf("frame %d, actor %q: %w", seq, actor, err)
	}
	return frame{actor: actor, m: m, size: n}, nil
}

// splitActor reads the actor in front of an authenticated payload: its
// length byte is checked, against the bound and then against the bytes
// there are, before the name is copied. The rest is the message.
func splitActor(payload []byte) (actor string, message []byte, err error) {
	if len(payload) < actorLengthBytes {
		return "", nil, fmt.Errorf("an empty payload, without an actor: %w", frames.ErrTruncated)
	}
	n := int(payload[0])
	if n == 0 || n > follow.MaxActorBytes {
		return "", nil, fmt.Errorf("actor length %d, not 1 to %d: %w", n, follow.MaxActorBytes, frames.ErrCorrupt)
	}
	if rest := len(payload) - actorLengthBytes; n > rest {
		return "", nil, fmt.Errorf("an actor of %d bytes, %d left in the payload: %w", n, rest, frames.ErrTruncated)
	}
	return string(payload[actorLengthBytes : actorLengthBytes+n]), payload[actorLengthBytes+n:], nil
}

// appendPayload appends a frame's payload: actor's length and name, then
// m as follow encodes it. An actor follow.ValidActor refuses, or a message
// follow will not encode, is ErrInvalid.
func appendPayload(dst []byte, actor string, m follow.Message, lim follow.Limits) ([]byte, error) {
	if !follow.ValidActor(actor) {
		return dst, fmt.Errorf("%w: an actor name of %d bytes, not 1 to %d", ErrInvalid, len(actor), follow.MaxActorBytes)
	}
	start := len(dst)
	dst = append(append(dst, byte(len(actor))), actor...)
	dst, err := follow.AppendMessage(dst, m, lim)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: actor %q: %w", ErrInvalid, actor, err)
	}
	return dst, nil
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

// Send writes actor and m as the next frame; concurrent calls write one
// frame after the other. An actor follow.ValidActor refuses, or a message follow
// refuses to encode, is ErrInvalid, and the Conn stays usable; after a
// write fails every call returns that *ConnError.
func (c *Conn) Send(actor string, m follow.Message) error {
	payload, err := appendPayload(nil, actor, m, c.lim)
	if err != nil {
		return err
	}
	return c.sendPayload(payload)
}

// frameBytes is what a payload takes on the wire as a frame: what a
// peer's queue counts against Config.MaxQueueBytes.
func frameBytes(payload []byte) int64 { return headerBytes + int64(len(payload)) + macBytes }

// sendPayload writes a payload (appendPayload, appendControl) as the next
// frame.
func (c *Conn) sendPayload(payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendLocked(payload)
}

// sendLocked is sendPayload with c.wmu held.
func (c *Conn) sendLocked(payload []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if int64(len(payload)) > c.maxPayload {
		return fmt.Errorf("%w: a payload of %d bytes, past the frame bound of %d", ErrInvalid, len(payload), c.maxPayload)
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
	c.lastWrite.Store(time.Now().UnixNano())
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
