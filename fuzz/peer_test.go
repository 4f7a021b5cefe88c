package fuzz

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

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
// and frames. It cannot forge a MAC, so what is behind one, an actor's
// name and a message, is reached by sealing payloads with the frame key
// the recorded handshake gives (seal, from the drawing in peer's doc.go):
// FuzzPeerPayload fuzzes the payload whole, its message part being
// follow.DecodeMessage's input, fuzzed by FuzzFollowMessage.

// peerLimits let a frame claim 16 MiB, so an allocation by what a length
// claims would show.
var peerLimits = follow.Limits{MaxTailBytes: 16 << 20}

var peerKey = bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 4)

func peerConfig(id follow.FollowerID, seed byte) peer.Config {
	return peer.Config{ID: id, Key: peerKey, Limits: peerLimits, Rand: rand.NewChaCha8([32]byte{seed}), HandshakeTimeout: time.Minute}
}

// honestPeer is what dialer "a" and listener "b" write in a real handshake
// with those nonces, then the frames of follow's golden messages a sends,
// message i for honestActor(i).
type honestPeer struct {
	dialerHandshake, listenerHandshake []byte
	messages                           []follow.Message
	frames                             [][]byte // frames[i] is message i's frame
	frameKey                           []byte   // the MAC key of a's frames to b
}

// honestActor is the actor the honest peer sends message i for: several,
// interleaved, the longest and one not UTF-8 among them.
func honestActor(i int) string {
	return []string{"db-1", "db-2", strings.Repeat("x", follow.MaxActorBytes), "\x00\xff", "db-1"}[i%5]
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
			if _, _, err := lc.Receive(); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, m := range h.messages {
		if err := dc.Send(honestActor(i), m); err != nil {
			return h, err
		}
		h.frames = append(h.frames, ra.Take())
	}
	if err := <-errc; err != nil {
		return h, err
	}
	if h.frameKey, err = frameKey(h); err != nil {
		return h, err
	}
	for i, fr := range h.frames {
		if !bytes.Equal(h.seal(uint64(i), payloadOf(fr)), fr) {
			return h, fmt.Errorf("frame %d sealed again from the drawing differs from the one a sent: the drawing and peer disagree", i)
		}
	}
	return h, nil
}

// payloadOf is the payload of a frame: past its length and header MAC,
// before its MAC.
func payloadOf(frame []byte) []byte { return frame[4+16 : len(frame)-sha256.Size] }

// frameKey is K(D->L) as peer's doc.go draws it, from the recorded hellos.
func frameKey(h honestPeer) ([]byte, error) {
	dh := h.dialerHandshake[:len(h.dialerHandshake)-sha256.Size]
	lh := h.listenerHandshake[:len(h.listenerHandshake)-sha256.Size]
	t := sha256.Sum256(bytes.Join([][]byte{[]byte("framectl peer handshake v2"), {0}, dh, lh}, nil))
	return hkdf.Key(sha256.New, peerKey, t[:], "frames dialer to listener", sha256.Size)
}

// seal is the frame the dialer would send as its frame seq with payload:
// length, header MAC, payload, MAC, as peer's doc.go draws them.
func (h *honestPeer) seal(seq uint64, payload []byte) []byte {
	mac := func(parts ...[]byte) []byte {
		m := hmac.New(sha256.New, h.frameKey)
		for _, p := range parts {
			m.Write(p)
		}
		return m.Sum(nil)
	}
	length := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	s := binary.LittleEndian.AppendUint64(nil, seq)
	out := append(bytes.Clone(length), mac([]byte{1}, s, length)[:16]...)
	out = append(out, payload...)
	return append(out, mac([]byte{2}, s, length, payload)...)
}

// badActorPayloads are payloads whose actor is refused: its length 0, past
// follow.MaxActorBytes, past the payload, or missing; each followed by a
// message follow accepts, where there is room.
func badActorPayloads(h *honestPeer) [][]byte {
	message, _ := follow.AppendMessage(nil, h.messages[0], peerLimits)
	with := func(b ...byte) []byte { return append(b, message...) }
	return [][]byte{
		nil,
		with(0),
		with(append([]byte{follow.MaxActorBytes + 1}, strings.Repeat("x", follow.MaxActorBytes+1)...)...),
		with(append([]byte{255}, strings.Repeat("x", 255)...)...),
		{10, 'd', 'b'},
		{1},
		{4, 'd', 'b', '-', '1'}, // the actor whole, and no message after it
	}
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
func checkPeerErr(t *testing.T, err error, op string, want follow.FollowerID) {
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
		honestBytes, peerID, blame := h.dialerHandshake, follow.FollowerID("a"), follow.FollowerID("")
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
	for _, p := range badActorPayloads(h) {
		// An honest frame, then one whose actor is refused.
		f.Add(append(bytes.Clone(h.frames[0]), h.seal(1, p)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// How many honest frames the bytes begin with.
		whole, rest := 0, data
		for whole < len(h.frames) && bytes.HasPrefix(rest, h.frames[whole]) {
			rest = rest[len(h.frames[whole]):]
			whole++
		}
		var got []follow.Message
		var actors []string
		var err error
		bound := uint64(8*len(data)) + 256<<10
		alloc := allocatedWithin(bound, func() {
			got, actors = got[:0], actors[:0]
			c, herr := peer.Server(context.Background(), newScript(append(bytes.Clone(h.dialerHandshake), data...)), peerConfig("b", 2))
			if herr != nil {
				err = herr
				return
			}
			for {
				var actor string
				var m follow.Message
				if actor, m, err = c.Receive(); err != nil {
					return
				}
				got, actors = append(got, m), append(actors, actor)
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
			if actors[i] != honestActor(i) {
				t.Fatalf("message %d delivered for actor %q, sent for %q", i, actors[i], honestActor(i))
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

// FuzzPeerPayload plays a dialer after an honest handshake whose first
// frame authenticates (sealed with the connection's key) and carries the
// fuzz bytes as its payload: what is behind the MAC. The listener
// passes over a well-formed control frame (wellFormedControl), and
// delivers the actor and message exactly when the bytes are an actor's
// length of 1 to follow.MaxActorBytes, that many bytes and a message
// follow accepts, which the actor and message encode back to; otherwise
// it delivers nothing, and an actor length past the bound is
// frames.ErrCorrupt and one past the payload frames.ErrTruncated, both
// before follow's decoder runs.
func FuzzPeerPayload(f *testing.F) {
	h := honestTranscript(f)
	for _, fr := range h.frames {
		f.Add(payloadOf(fr))
	}
	for _, p := range badActorPayloads(h) {
		f.Add(p)
	}
	f.Add([]byte{1, 'a', 1, 99, 0, 0, 0, 0})
	f.Add([]byte{0, 1})                                                   // a heartbeat
	f.Add([]byte{0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 1, 'a'})                   // a question about a
	f.Add([]byte{0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 1, 'a', 1, 0xf4, 1, 0, 0}) // its answer: 500 ms
	f.Add([]byte{0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 1, 'a', 2, 0xf4, 1, 0, 0}) // known byte 2
	f.Add([]byte{0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 2, 'a', 0x01})             // a control character
	f.Fuzz(func(t *testing.T, payload []byte) {
		if int64(len(payload)) > 1+follow.MaxActorBytes+peerLimits.MaxMessageBytes() {
			return // past the frame bound: FuzzPeerFrames' and peer's own tests'
		}
		wire := append(bytes.Clone(h.dialerHandshake), h.seal(0, payload)...)
		var actor string
		var m follow.Message
		var err, next error
		bound := uint64(8*len(payload)) + 256<<10
		alloc := allocatedWithin(bound, func() {
			c, herr := peer.Server(context.Background(), newScript(wire), peerConfig("b", 2))
			if herr != nil {
				err = herr
				return
			}
			if actor, m, err = c.Receive(); err == nil {
				_, _, next = c.Receive()
			}
		})
		if alloc > bound {
			t.Fatalf("a payload of %d bytes allocated %d, past %d", len(payload), alloc, bound)
		}
		var me *follow.MessageError
		// The length byte is checked against the bound first, then
		// against the bytes there are.
		switch {
		case len(payload) == 0:
			if !errors.Is(err, frames.ErrTruncated) || errors.As(err, &me) {
				t.Fatalf("an empty payload gave %v, want frames.ErrTruncated before follow's decoder", err)
			}
		case payload[0] == 0:
			// A control frame (peer's doc, "Control frames"): passed over
			// by Receive when well formed, so the stream's end comes next.
			if wellFormedControl(payload) {
				if err != io.EOF {
					t.Fatalf("control payload %x gave %v, want it passed over (io.EOF after it)", payload, err)
				}
				return
			}
			if !errors.Is(err, frames.ErrCorrupt) && !errors.Is(err, frames.ErrTruncated) || errors.As(err, &me) {
				t.Fatalf("control payload %x gave %v, want frames.ErrCorrupt or frames.ErrTruncated", payload, err)
			}
		case payload[0] > follow.MaxActorBytes:
			if !errors.Is(err, frames.ErrCorrupt) || errors.As(err, &me) {
				t.Fatalf("payload %x: actor length %d gave %v, want frames.ErrCorrupt before follow's decoder", payload, payload[0], err)
			}
		case int(payload[0]) >= len(payload):
			if !errors.Is(err, frames.ErrTruncated) || errors.As(err, &me) {
				t.Fatalf("payload %x: an actor length past the payload gave %v, want frames.ErrTruncated before follow's decoder", payload, err)
			}
		}
		if err != nil {
			checkPeerErr(t, err, "receive", "a")
			return
		}
		if herr := next; herr != io.EOF {
			t.Fatalf("after the one frame: %v, want io.EOF", herr)
		}
		again, aerr := follow.AppendMessage(append([]byte{byte(len(actor))}, actor...), m, peerLimits)
		if aerr != nil || !bytes.Equal(again, payload) {
			t.Fatalf("payload\n%x\ndelivered for %q as %#v, which encodes as\n%x (%v)", payload, actor, m, again, aerr)
		}
	})
}

// wellFormedControl is the grammar of a control payload as peer's doc.go
// draws it: 0, then a heartbeat (kind 1, nothing more), a question (kind
// 2: an 8-byte query ID, a subject's length and the subject, a node ID)
// or an answer (kind 3: the same, a known byte of 0 or 1 and 4 bytes of
// silence).
func wellFormedControl(p []byte) bool {
	if len(p) < 2 || p[0] != 0 {
		return false
	}
	switch p[1] {
	case 1:
		return len(p) == 2
	case 2, 3:
	default:
		return false
	}
	if len(p) < 11 {
		return false
	}
	n := int(p[10])
	tail := 0
	if p[1] == 3 {
		tail = 5
	}
	if n == 0 || len(p) != 11+n+tail {
		return false
	}
	id := string(p[11 : 11+n])
	if !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) {
		return false
	}
	return p[1] == 2 || p[11+n] <= 1
}
