package peer

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// Part of the wire format (doc.go, "Handshake"): never change these.
const (
	helloMagic = "fctlpeer"
	// helloVersion is the version of the handshake and of the frames
	// after it: 2 since frames name their actor, 3 since a payload that
	// starts with 0 is a control frame (control.go). A node of another
	// version is refused in its hello (frames.ErrUnknownKind), so a frame
	// of one layout is never read as the other. The key schedule's labels
	// are version 2's: the version byte is in the transcript, so the keys
	// of two versions differ anyway.
	helloVersion   = 3
	roleDialer     = 1
	roleListener   = 2
	nonceBytes     = 32
	proofBytes     = sha256.Size
	helloFixed     = len(helloMagic) + 1 + 1 + nonceBytes + 1 // magic, version, role, nonce, ID length
	transcriptHead = "framectl peer handshake v2"
	// tlsExporterLabel names the TLS keying material the transcript binds
	// (RFC 8446, section 7.5), so that a handshake relayed between two
	// TLS connections fails.
	tlsExporterLabel = "EXPORTER-framectl-peer"
	bindingBytes     = 32
)

// Client runs the handshake over c as the dialer, expecting the node at the
// other end to prove, with the cluster key, that it is want; it then
// proves the same of itself. c may be a *tls.Conn (its TLS handshake runs
// first and the transcript is bound to it). The handshake ends within
// cfg.HandshakeTimeout or when ctx ends. On failure c is left open, and the
// error is a *ConnError.
func Client(ctx context.Context, c net.Conn, cfg Config, want follow.FollowerID) (*Conn, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	if err := checkID(want); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if want == s.id {
		return nil, fmt.Errorf("%w: node %s dialing itself", ErrInvalid, want)
	}
	return handshake(ctx, c, s, true, want)
}

// Server runs the handshake over c as the listener: the dialer proves that
// it holds the cluster key and which node it is, and so does the listener.
// Otherwise as Client.
func Server(ctx context.Context, c net.Conn, cfg Config) (*Conn, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	return handshake(ctx, c, s, false, "")
}

// aLongTimeAgo is a deadline in the past: it interrupts a blocked read or
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

func handshake(ctx context.Context, c net.Conn, s *settings, dialer bool, want follow.FollowerID) (*Conn, error) {
	addr := remoteAddr(c)
	peer := want
	fail := func(err error) (*Conn, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, &ConnError{Op: "handshake", Addr: addr, Peer: peer, Err: err}
	}
	if s.handshakeTimeout > 0 {
		if err := c.SetDeadline(time.Now().Add(s.handshakeTimeout)); err != nil {
			return fail(err)
		}
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	defer stop()

	binding, err := tlsBinding(ctx, c)
	if err != nil {
		return fail(err)
	}
	nonce := make([]byte, nonceBytes)
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return fail(fmt.Errorf("drawing a nonce: %w", err))
	}
	br := bufio.NewReaderSize(c, readBufferBytes)
	var transcript []byte
	var sendInfo, recvInfo string
	if dialer {
		mine := appendHello(nil, roleDialer, nonce, s.id)
		if _, err := c.Write(mine); err != nil {
			return fail(err)
		}
		theirs, id, err := readHello(br, roleListener)
		if err != nil {
			return fail(err)
		}
		transcript = transcriptHash(binding, mine, theirs)
		if err := readProof(br, s.keys, proofLabelListen, transcript); err != nil {
			return fail(err)
		}
		if id != want {
			return fail(fmt.Errorf("%w: proved it is %s", ErrWrongPeer, id))
		}
		if _, err := c.Write(s.keys.prove(proofLabelDialer, transcript)); err != nil {
			return fail(err)
		}
		sendInfo, recvInfo = keyInfoToListen, keyInfoToDialer
	} else {
		theirs, id, err := readHello(br, roleDialer)
		if err != nil {
			return fail(err)
		}
		mine := appendHello(nil, roleListener, nonce, s.id)
		transcript = transcriptHash(binding, theirs, mine)
		if _, err := c.Write(append(mine, s.keys.prove(proofLabelListen, transcript)...)); err != nil {
			return fail(err)
		}
		if err := readProof(br, s.keys, proofLabelDialer, transcript); err != nil {
			return fail(err)
		}
		// Authenticated: from here on the error names it.
		peer = id
		if id == s.id {
			return fail(fmt.Errorf("%w: node %s reached itself", ErrWrongPeer, id))
		}
		sendInfo, recvInfo = keyInfoToDialer, keyInfoToListen
	}
	if !stop() {
		return fail(errors.New("handshake cancelled"))
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	return newConn(c, br, s, peer, s.keys.frameKey(sendInfo, transcript), s.keys.frameKey(recvInfo, transcript)), nil
}

func remoteAddr(c net.Conn) string {
	if a := c.RemoteAddr(); a != nil {
		return a.String()
	}
	return "?"
}

// tlsBinding is the TLS connection's exported keying material, or nothing
// for a plain connection.
func tlsBinding(ctx context.Context, c net.Conn) ([]byte, error) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil, nil
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	st := tc.ConnectionState()
	b, err := st.ExportKeyingMaterial(tlsExporterLabel, nil, bindingBytes)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return b, nil
}

// appendHello appends a hello (doc.go, "Handshake").
func appendHello(dst []byte, role byte, nonce []byte, id follow.FollowerID) []byte {
	dst = append(dst, helloMagic...)
	dst = append(dst, helloVersion, role)
	dst = append(dst, nonce...)
	dst = append(dst, byte(len(id)))
	return append(dst, id...)
}

// readHello reads a hello of the role expected, accepting only what
// appendHello writes; it reads at most helloFixed+255 bytes, into a buffer
// of that size at most.
func readHello(r io.Reader, role byte) (hello []byte, id follow.FollowerID, err error) {
	hello = make([]byte, helloFixed, helloFixed+maxIDBytes)
	if err := readFull(r, hello, "hello"); err != nil {
		return nil, "", err
	}
	switch {
	case string(hello[:len(helloMagic)]) != helloMagic:
		return nil, "", fmt.Errorf("hello: magic %q, not %q: not a framectl peer: %w", hello[:len(helloMagic)], helloMagic, frames.ErrUnknownKind)
	case hello[8] != helloVersion:
		return nil, "", fmt.Errorf("hello: version %d, this node speaks %d: %w", hello[8], helloVersion, frames.ErrUnknownKind)
	case hello[9] != role:
		return nil, "", fmt.Errorf("hello: role %d, want %d: %w", hello[9], role, frames.ErrCorrupt)
	case hello[helloFixed-1] == 0:
		return nil, "", fmt.Errorf("hello: empty node ID: %w", frames.ErrCorrupt)
	}
	n := int(hello[helloFixed-1])
	hello = hello[:helloFixed+n]
	if err := readFull(r, hello[helloFixed:], "hello node ID"); err != nil {
		return nil, "", err
	}
	id = follow.FollowerID(hello[helloFixed:])
	if err := checkID(id); err != nil {
		return nil, "", fmt.Errorf("hello: %v: %w", err, frames.ErrCorrupt)
	}
	return hello, id, nil
}

func readProof(r io.Reader, k *schedule, label string, transcript []byte) error {
	proof := make([]byte, proofBytes)
	if err := readFull(r, proof, label+" proof"); err != nil {
		return err
	}
	if !hmac.Equal(proof, k.prove(label, transcript)) {
		return fmt.Errorf("%s proof does not verify: another cluster key, or the handshake was altered or replayed: %w", label, ErrAuth)
	}
	return nil
}

// readFull is io.ReadFull, but a stream that ends early is
// frames.ErrTruncated (not io.EOF, which Receive keeps for a peer that
// closed between frames).
func readFull(r io.Reader, b []byte, what string) error {
	n, err := io.ReadFull(r, b)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: the stream ended after %d of %d bytes: %w", what, n, len(b), frames.ErrTruncated)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// transcriptHash is SHA-256 over everything both sides said, in order, and
// the TLS binding: the proofs and the frame keys are bound to it.
func transcriptHash(binding, dialerHello, listenerHello []byte) []byte {
	h := sha256.New()
	h.Write([]byte(transcriptHead))
	h.Write([]byte{byte(len(binding))})
	h.Write(binding)
	h.Write(dialerHello)
	h.Write(listenerHello)
	return h.Sum(nil)
}
