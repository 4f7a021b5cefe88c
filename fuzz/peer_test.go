package fuzz

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/conntap"
	"github.com/framectl/framectl/peer"
)

// What a peer sends before it is authenticated (the handshake) and after
// (frames) is untrusted input: any bytes either are exactly what an honest
// peer with the key sends, and are accepted, or fail with a *peer.ConnError
// matching one sentinel, having delivered nothing that was not sent, and
// allocated within bounds. The nonces are fixed (Config.Rand), so an
// honest transcript replays and the fuzzer starts from valid handshakes
// and frames; it cannot forge a MAC, so the payloads behind one are
// follow.DecodeMessage's input, fuzzed by FuzzFollowMessage.

// peerLimits let a frame claim 16 MiB, so an allocation by what a length
// claims would show.
var peerLimits = follow.Limits{MaxTailBytes: 16 << 20}

var peerKey = bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 4)

func peerConfig(id follow.NodeID, seed byte) peer.Config {
	return peer.Config{ID: id, Key: peerKey, Limits: peerLimits, Rand: rand.NewChaCha8([32]byte{seed}), HandshakeTimeout: time.Minute}
}

// honestPeer is what dialer "a" and listener "b" write in a real handshake
// with those nonces, then the frames of follow's golden messages a sends.
type honestPeer struct {
	dialerHandshake, listenerHandshake []byte
	messages                           []follow.Message
	frames                             [][]byte // frames[i] is message i's frame
}

var honest struct {
	once sync.Once
	p    honestPeer
	err  error
}

func honestTranscript(t testing.TB) *honestPeer {
	honest.once.Do(func() { honest.p, honest.err = recordHonest(t) })
	if honest.err != nil {
		t.Fatal(honest.err)
	}
	return &honest.p
}

func recordHonest(t testing.TB) (honestPeer, error) {
	var h honestPeer
	for _, s := range followSeeds(t) {
		m, err := follow.DecodeMessage(s, followPeer, followLimits)
		if err != nil {
			return h, err
		}
		h.messages = append(h.messages, m)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ra, rb := &conntap.Conn{Conn: a}, &conntap.Conn{Conn: b}
	errc := make(chan error, 1)
	var lc *peer.Conn
	go func() {
		var err error
		lc, err = peer.Server(context.Background(), rb, peerConfig("b", 2))
		errc <- err
	}()
	dc, err := peer.Client(context.Background(), ra, peerConfig("a", 1), "b")
	if err != nil {
		return h, err
	}
	if err := <-errc; err != nil {
		return h, err
	}
	h.dialerHandshake, h.listenerHandshake = ra.Take(), rb.Take()
	go func() {
		for range h.messages {
			if _, err := lc.Receive(); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for _, m := range h.messages {
		if err := dc.Send(m); err != nil {
			return h, err
		}
		h.frames = append(h.frames, ra.Take())
	}
	return h, <-errc
}

// script is a net.Conn whose other end says the bytes given, then closes;
// what is written to it is dropped.
type script struct{ r *bytes.Reader }

func newScript(b []byte) *script                   { return &script{r: bytes.NewReader(b)} }
func (s *script) Read(b []byte) (int, error)       { return s.r.Read(b) }
func (s *script) Write(b []byte) (int, error)      { return len(b), nil }
func (s *script) Close() error                     { return nil }
func (s *script) LocalAddr() net.Addr              { return scriptAddr{} }
func (s *script) RemoteAddr() net.Addr             { return scriptAddr{} }
func (s *script) SetDeadline(time.Time) error      { return nil }
func (s *script) SetReadDeadline(time.Time) error  { return nil }
func (s *script) SetWriteDeadline(time.Time) error { return nil }

type scriptAddr struct{}

func (scriptAddr) Network() string { return "script" }
func (scriptAddr) String() string  { return "fuzz-wire" }

// checkPeerErr asserts what every failure of a connection must be: a
// *peer.ConnError of op, at the remote address, naming want as the peer,
// matching exactly one sentinel.
func checkPeerErr(t *testing.T, err error, op string, want follow.NodeID) {
	t.Helper()
	var ce *peer.ConnError
	if !errors.As(err, &ce) || ce.Op != op || ce.Addr != "fuzz-wire" || ce.Peer != want {
		t.Fatalf("error %v (%T) is not a %s *peer.ConnError at fuzz-wire naming %q", err, err, op, want)
	}
	oneSentinel(t, err, peer.ErrAuth, peer.ErrWrongPeer, frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind)
}

// allocatedWithin is allocatedBy, and leastAllocatedBy when that is past
// bound: the three runs only when noise may have to be told from a
// violation (f must be safe to repeat).
func allocatedWithin(bound uint64, f func()) uint64 {
	if a := allocatedBy(f); a <= bound {
		return a
	}
	return leastAllocatedBy(f)
}

// FuzzPeerHandshake plays the other side of a handshake: the dialer's
// bytes to a listener (listener true), or the listener's to a dialer. It
// succeeds exactly when the bytes begin with what the honest peer says.
func FuzzPeerHandshake(f *testing.F) {
	h := honestTranscript(f)
	f.Add(true, h.dialerHandshake)
	f.Add(false, h.listenerHandshake)
	f.Add(true, h.dialerHandshake[:len(h.dialerHandshake)-32])
	f.Add(true, append(bytes.Clone(h.dialerHandshake), h.frames[0]...))
	f.Add(false, []byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, listener bool, data []byte) {
		var c *peer.Conn
		var err error
		alloc := allocatedWithin(64<<10, func() {
			if listener {
				c, err = peer.Server(context.Background(), newScript(data), peerConfig("b", 2))
			} else {
				c, err = peer.Client(context.Background(), newScript(data), peerConfig("a", 1), "b")
			}
		})
		if alloc > 64<<10 {
			t.Fatalf("a handshake over %d bytes allocated %d", len(data), alloc)
		}
		honestBytes, peerID, blame := h.dialerHandshake, follow.NodeID("a"), follow.NodeID("")
		if !listener {
			honestBytes, peerID, blame = h.listenerHandshake, "b", "b"
		}
		if bytes.HasPrefix(data, honestBytes) {
			if err != nil {
				t.Fatalf("the honest handshake failed: %v", err)
			}
			if c.Peer() != peerID {
				t.Fatalf("authenticated %q, want %q", c.Peer(), peerID)
			}
			return
		}
		if err == nil {
			t.Fatalf("accepted a handshake that is not the honest one:\n%x\nauthenticated %q", data, c.Peer())
		}
		checkPeerErr(t, err, "handshake", blame)
	})
}

// FuzzPeerFrames plays a dialer after an honest handshake: the fuzz bytes
// are its frames. The listener delivers exactly the honest messages whose
// frames the bytes begin with, in order, then stops on a *peer.ConnError,
// or on io.EOF when the bytes end between honest frames.
func FuzzPeerFrames(f *testing.F) {
	h := honestTranscript(f)
	all := bytes.Join(h.frames, nil)
	f.Add(all)
	f.Add(h.frames[0])
	f.Add(append(bytes.Clone(h.frames[1]), h.frames[0]...))
	f.Add(append(bytes.Clone(h.frames[0]), h.frames[0]...))
	f.Add(all[:len(all)-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		// How many honest frames the bytes begin with.
		whole, rest := 0, data
		for whole < len(h.frames) && bytes.HasPrefix(rest, h.frames[whole]) {
			rest = rest[len(h.frames[whole]):]
			whole++
		}
		var got []follow.Message
		var err error
		bound := uint64(8*len(data)) + 256<<10
		alloc := allocatedWithin(bound, func() {
			got = got[:0]
			c, herr := peer.Server(context.Background(), newScript(append(bytes.Clone(h.dialerHandshake), data...)), peerConfig("b", 2))
			if herr != nil {
				err = herr
				return
			}
			for {
				var m follow.Message
				if m, err = c.Receive(); err != nil {
					return
				}
				got = append(got, m)
			}
		})
		if alloc > bound {
			t.Fatalf("%d bytes of frames allocated %d, past %d", len(data), alloc, bound)
		}
		if len(got) != whole {
			t.Fatalf("delivered %d messages, the bytes begin with %d honest frames", len(got), whole)
		}
		for i, m := range got {
			want, _ := follow.AppendMessage(nil, h.messages[i], peerLimits)
			again, aerr := follow.AppendMessage(nil, m, peerLimits)
			if aerr != nil || !bytes.Equal(again, want) {
				t.Fatalf("message %d delivered as %#v, sent as %#v", i, m, h.messages[i])
			}
		}
		if err == io.EOF {
			if len(rest) != 0 {
				t.Fatalf("io.EOF with %d bytes past the honest frames", len(rest))
			}
			return
		}
		checkPeerErr(t, err, "receive", "a")
	})
}
