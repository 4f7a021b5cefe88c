package peer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// framePair returns a sender and a receiver with the keys of one direction
// of one connection, without a network: what the sender writes is in
// out, and the receiver reads whatever in gives it.
type framePair struct {
	sendKey []byte
	s       *settings
}

func newFramePair(t *testing.T, lim follow.Limits) *framePair {
	t.Helper()
	cfg := testConfig("a", testKey(1), 1)
	cfg.Limits = lim
	s, err := cfg.settings()
	if err != nil {
		t.Fatal(err)
	}
	return &framePair{sendKey: s.keys.frameKey(keyInfoToListen, []byte("transcript")), s: s}
}

// frameActor is the actor frames sends message i for: two actors,
// interleaved on the one connection.
func frameActor(i int) string { return []string{"db-1", "db-2"}[i%2] }

// frames encodes ms as the sender's frames 0, 1, ..., message i for
// frameActor(i).
func (p *framePair) frames(t *testing.T, ms ...follow.Message) []byte {
	t.Helper()
	w := newWire(nil)
	c := newConn(w, nil, p.s, "b", p.sendKey, nil)
	for i, m := range ms {
		if err := c.Send(frameActor(i), m); err != nil {
			t.Fatal(err)
		}
	}
	return w.wrote.Bytes()
}

// payloads encodes payloads, as they are, as the sender's frames 0, 1, ...
func (p *framePair) payloads(t *testing.T, payloads ...[]byte) []byte {
	t.Helper()
	w := newWire(nil)
	c := newConn(w, nil, p.s, "b", p.sendKey, nil)
	for _, b := range payloads {
		if err := c.sendPayload(b); err != nil {
			t.Fatal(err)
		}
	}
	return w.wrote.Bytes()
}

// receiver reads wire as the listener of that connection.
func (p *framePair) receiver(wire []byte) *Conn {
	w := newWire(wire)
	return newConn(w, bufio.NewReaderSize(w, readBufferBytes), p.s, "a", nil, p.sendKey)
}

// receiveAll reads until an error, returning what was delivered.
func receiveAll(c *Conn) ([]follow.Message, error) {
	got, _, err := receiveActors(c)
	return got, err
}

// receiveActors is receiveAll, with the actor of each message.
func receiveActors(c *Conn) ([]follow.Message, []string, error) {
	var got []follow.Message
	var actors []string
	for {
		actor, m, err := c.Receive()
		if err != nil {
			return got, actors, err
		}
		got, actors = append(got, m), append(actors, actor)
	}
}

var testMessages = []follow.Message{
	&follow.Fence{Epoch: 7},
	&follow.Append{Epoch: 7, Prev: follow.Point{Seq: 1, Chain: 2}, Durable: follow.Point{Seq: 1, Chain: 2},
		Entries: []follow.Entry{{Seq: 2, Before: 2, After: 3, Body: []byte("commit 2")}}},
	&follow.Ack{Epoch: 7, End: follow.Point{Seq: 2, Chain: 3}},
}

// Two actors' messages interleaved on one connection each arrive with
// the actor they were sent for.
func TestFramesRoundTrip(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	got, actors, err := receiveActors(p.receiver(p.frames(t, testMessages...)))
	if err != io.EOF {
		t.Fatalf("after the frames: %v, want io.EOF", err)
	}
	if !reflect.DeepEqual(got, testMessages) {
		t.Fatalf("received %#v", got)
	}
	if want := []string{"db-1", "db-2", "db-1"}; !reflect.DeepEqual(actors, want) {
		t.Fatalf("received for actors %q, sent for %q", actors, want)
	}
}

// An actor is any 1 to follow.MaxActorBytes bytes: the longest, and
// bytes that are not UTF-8, zeros included, arrive as they were sent.
func TestFrameActorAnyBytes(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	sent := []string{strings.Repeat("x", follow.MaxActorBytes), "\x00\xff\n", "a"}
	w := newWire(nil)
	c := newConn(w, nil, p.s, "b", p.sendKey, nil)
	for _, a := range sent {
		if err := c.Send(a, testMessages[0]); err != nil {
			t.Fatalf("actor %q: %v", a, err)
		}
	}
	_, actors, err := receiveActors(p.receiver(w.wrote.Bytes()))
	if err != io.EOF || !reflect.DeepEqual(actors, sent) {
		t.Fatalf("received for %q (%v), sent for %q", actors, err, sent)
	}
}

// A frame whose bytes authenticate but whose actor length is 0, past
// follow.MaxActorBytes or past the payload (a peer's bug): refused with
// the error its kind is, before the message is looked at, and nothing of
// it or after it delivered.
func TestFrameBadActor(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	message, err := follow.AppendMessage(nil, testMessages[0], follow.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	good, err := appendPayload(nil, "db-1", testMessages[0], follow.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	actor := func(n int, name string) []byte { return append(append([]byte{byte(n)}, name...), message...) }
	for _, c := range []struct {
		name    string
		payload []byte
		want    error
	}{
		{"empty payload", nil, frames.ErrTruncated},
		{"length 0", actor(0, ""), frames.ErrCorrupt},
		{"length 121", actor(follow.MaxActorBytes+1, strings.Repeat("x", follow.MaxActorBytes+1)), frames.ErrCorrupt},
		{"length 255", actor(255, strings.Repeat("x", 255)), frames.ErrCorrupt},
		{"length past the payload", []byte{10, 'd', 'b'}, frames.ErrTruncated},
		{"length 1, no byte after it", []byte{1}, frames.ErrTruncated},
		{"length 120, payload of 100", append([]byte{follow.MaxActorBytes}, strings.Repeat("x", 99)...), frames.ErrTruncated},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := receiveAll(p.receiver(p.payloads(t, good, c.payload, good)))
			if len(got) != 1 {
				t.Fatalf("delivered %d messages, want the one before the bad frame", len(got))
			}
			if ce := connErr(t, err, "receive", c.want); ce.Peer != "a" {
				t.Errorf("error names %q", ce.Peer)
			}
			var me *follow.MessageError
			if errors.As(err, &me) {
				t.Errorf("%v: the actor failed, yet follow's decoder ran", err)
			}
		})
	}
	// The actor is well formed and the message after it empty: follow's.
	_, err = receiveAll(p.receiver(p.payloads(t, []byte{4, 'd', 'b', '-', '1'})))
	var me *follow.MessageError
	if connErr(t, err, "receive", frames.ErrTruncated); !errors.As(err, &me) {
		t.Errorf("%v: no *follow.MessageError for an empty message", err)
	}
}

// Every single bit flipped anywhere in a frame: the frame is never
// delivered, and the MAC says so (the header's for its first 20 bytes:
// before the length is trusted).
func TestFrameEveryBitFlip(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	wire := p.frames(t, testMessages[1], testMessages[2])
	first := headerBytes + int(binary.LittleEndian.Uint32(wire)) + macBytes
	for bit := range first * 8 {
		bad := bytes.Clone(wire)
		bad[bit/8] ^= 1 << (bit % 8)
		r := p.receiver(bad)
		var got []follow.Message
		var err error
		alloc := allocatedBy(func() { got, err = receiveAll(r) })
		if len(got) != 0 {
			t.Fatalf("bit %d flipped: delivered %#v", bit, got)
		}
		if ce := connErr(t, err, "receive", ErrAuth); ce.Peer != "a" {
			t.Fatalf("bit %d flipped: error names %q", bit, ce.Peer)
		}
		// runtime.MemStats counts the whole process, whose other
		// goroutines (the runtime's, tests' cleanups) allocate now and
		// then while Receive runs: past the bound, the least of three
		// reads of the same bytes decides, since noise only adds.
		for try := 0; bit < headerBytes*8 && alloc > 4096 && try < 2; try++ {
			r := p.receiver(bad)
			alloc = min(alloc, allocatedBy(func() { receiveAll(r) }))
		}
		if bit < headerBytes*8 && alloc > 4096 {
			t.Fatalf("bit %d flipped, in the header: %d bytes allocated before the header failed", bit, alloc)
		}
	}
}

// A copied frame, two frames swapped, a frame of another connection: each
// fails its MAC, since the MAC covers the frame's place in its stream.
func TestFrameReplayReorder(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	wire := p.frames(t, testMessages...)
	var fr [][]byte
	for rest := wire; len(rest) > 0; {
		n := headerBytes + int(binary.LittleEndian.Uint32(rest)) + macBytes
		fr, rest = append(fr, rest[:n]), rest[n:]
	}
	other := newFramePair(t, follow.Limits{})
	other.sendKey = other.s.keys.frameKey(keyInfoToListen, []byte("another transcript"))
	for _, c := range []struct {
		name      string
		wire      []byte
		delivered int
	}{
		{"copy", bytes.Join([][]byte{fr[0], fr[0], fr[1]}, nil), 1},
		{"swap", bytes.Join([][]byte{fr[1], fr[0]}, nil), 0},
		{"dropped", bytes.Join([][]byte{fr[0], fr[2]}, nil), 1},
		{"another connection", other.frames(t, testMessages[0]), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := receiveAll(p.receiver(c.wire))
			if len(got) != c.delivered || c.delivered > 0 && !reflect.DeepEqual(got, testMessages[:c.delivered]) {
				t.Fatalf("delivered %#v", got)
			}
			connErr(t, err, "receive", ErrAuth)
		})
	}
	// The other direction's key: a frame reflected back to its sender.
	back := newConn(newWire(fr[0]), nil, p.s, "b", nil, p.s.keys.frameKey(keyInfoToDialer, []byte("transcript")))
	back.br = bufio.NewReader(back.c)
	_, _, err := back.Receive()
	connErr(t, err, "receive", ErrAuth)
}

// header is a frame header the sender would write as its frame seq, for
// a payload of n bytes: authenticated, whatever n is.
func (p *framePair) header(seq uint64, n uint32) []byte {
	c := newConn(newWire(nil), nil, p.s, "b", p.sendKey, nil)
	h := binary.LittleEndian.AppendUint32(nil, n)
	return append(h, headerMAC(c.sendMAC, seq, h)...)
}

// A length past the bound is refused before anything is read for it; a
// length within it, with the bytes missing, allocates with what arrives,
// not with what was claimed; a length not authenticated is refused before
// it is looked at.
func TestFrameTooLargeNoAlloc(t *testing.T) {
	lim := follow.Limits{} // 64 MiB tails
	p := newFramePair(t, lim)
	withTail := func(b []byte, n int) []byte { return append(b, make([]byte, n)...) }
	unauthenticated := binary.LittleEndian.AppendUint32(nil, uint32(lim.MaxMessageBytes()))
	for _, c := range []struct {
		name string
		wire []byte
		want error
	}{
		{"past the bound", withTail(p.header(0, uint32(p.s.maxPayload+1)), 1000), frames.ErrTooLarge},
		{"2^32-1", withTail(p.header(0, 1<<32-1), 1000), frames.ErrTooLarge},
		{"bound, 100 bytes sent", withTail(p.header(0, uint32(p.s.maxPayload)), 100), frames.ErrTruncated},
		{"bound, 200 KiB sent", withTail(p.header(0, uint32(p.s.maxPayload)), 200<<10), frames.ErrTruncated},
		{"bound, not authenticated", withTail(withTail(unauthenticated, headerMACBytes), 200<<10), ErrAuth},
		{"cut in the header", p.header(0, 10)[:7], frames.ErrTruncated},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := p.receiver(c.wire)
			var err error
			alloc := allocatedBy(func() { _, _, err = r.Receive() })
			connErr(t, err, "receive", c.want)
			// What arrived, twice (the buffer doubles), and a first piece.
			if bound := uint64(4*len(c.wire) + 2*firstChunkBytes + 16<<10); alloc > bound {
				t.Errorf("%d bytes on the wire made Receive allocate %d, past %d", len(c.wire), alloc, bound)
			}
			if _, _, again := r.Receive(); again != err {
				t.Errorf("after %v, Receive returns %v", err, again)
			}
		})
	}
	if !testing.Short() {
		// The bound itself: a message of the largest size goes through.
		p := newFramePair(t, follow.Limits{MaxTailBytes: 1 << 20})
		big := &follow.Append{Epoch: 1, Reset: true, Entries: []follow.Entry{{Seq: 1, After: 1, Body: make([]byte, 1<<20-28)}}}
		got, err := receiveAll(p.receiver(p.frames(t, big)))
		if err != io.EOF || len(got) != 1 {
			t.Fatalf("a message at the bound: %v", err)
		}
	}
}

// A frame whose bytes authenticate but are not a follow message after
// the actor (a peer's bug): refused with follow's error, never delivered.
func TestFrameAuthenticatedGarbage(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	got, err := receiveAll(p.receiver(p.payloads(t, []byte{1, 'a', 1, 99, 0, 0, 0, 0})))
	if len(got) != 0 {
		t.Fatalf("delivered %#v", got)
	}
	connErr(t, err, "receive", frames.ErrUnknownKind)
	var me *follow.MessageError
	if !errors.As(err, &me) || me.From != "a" {
		t.Fatalf("%v: no *follow.MessageError naming the peer", err)
	}
}

// Send refuses an actor follow.ValidActor refuses, and what follow will
// not encode, writing nothing; the Conn stays usable.
func TestConnSendInvalid(t *testing.T) {
	p := newFramePair(t, follow.Limits{})
	w := newWire(nil)
	c := newConn(w, nil, p.s, "b", p.sendKey, nil)
	if err := c.Send(testActor, &follow.Fence{}); !errors.Is(err, ErrInvalid) || !errors.Is(err, follow.ErrInvalid) {
		t.Fatalf("epoch 0: %v", err)
	}
	for _, actor := range []string{"", strings.Repeat("x", follow.MaxActorBytes+1), strings.Repeat("x", 256)} {
		if err := c.Send(actor, testMessages[0]); !errors.Is(err, ErrInvalid) {
			t.Fatalf("an actor of %d bytes: %v", len(actor), err)
		}
	}
	if w.wrote.Len() != 0 {
		t.Fatalf("refused sends wrote %d bytes", w.wrote.Len())
	}
	if err := c.Send(testActor, testMessages[0]); err != nil {
		t.Fatal(err)
	}
	if got, err := receiveAll(p.receiver(w.wrote.Bytes())); err != io.EOF || len(got) != 1 {
		t.Fatalf("after a refused message, the next: %v %v", got, err)
	}
}
