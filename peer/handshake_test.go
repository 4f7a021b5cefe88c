package peer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

func TestHandshake(t *testing.T) {
	key := testKey(1)
	dc, lc := connected(t, testConfig("a", key, 1), testConfig("b", key, 2))
	if dc.Peer() != "b" || lc.Peer() != "a" {
		t.Fatalf("peers: dialer sees %q, listener sees %q", dc.Peer(), lc.Peer())
	}
	// Frames both ways, each side's keys the other's.
	go func() { dc.Send(testActor, goldenFence) }()
	actor, m, err := lc.Receive()
	if err != nil || actor != testActor || !reflect.DeepEqual(m, goldenFence) {
		t.Fatalf("listener received %q %#v, %v", actor, m, err)
	}
	ack := &follow.Ack{Epoch: 7, End: follow.Point{Seq: 3, Chain: 9}}
	go func() { lc.Send("db-2", ack) }()
	if actor, m, err := dc.Receive(); err != nil || actor != "db-2" || !reflect.DeepEqual(m, ack) {
		t.Fatalf("dialer received %q %#v, %v", actor, m, err)
	}
}

// A node with another key: the dialer refuses the listener's proof and
// sends none of its own, so neither side authenticates the other.
func TestHandshakeWrongKey(t *testing.T) {
	_, _, derr, lerr, dtap, _ := handshakePair(t, testConfig("a", testKey(1), 1), testConfig("b", testKey(2), 2), "b")
	connErr(t, derr, "handshake", ErrAuth)
	if ce := connErr(t, lerr, "handshake", frames.ErrTruncated); ce.Peer != "" {
		t.Errorf("the listener names the unauthenticated dialer %q", ce.Peer)
	}
	if n := len(dtap.Written()); n != helloFixed+1 {
		t.Errorf("the dialer wrote %d bytes, its hello is %d: it sent a proof for a key it was not shown", n, helloFixed+1)
	}
}

// A dialer that sends a hello and a proof it cannot make.
func TestHandshakeBadDialerProof(t *testing.T) {
	key := testKey(1)
	a, b := net.Pipe()
	defer a.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := Server(context.Background(), b, testConfig("b", key, 2))
		b.Close()
		errc <- err
	}()
	a.Write(appendHello(nil, roleDialer, make([]byte, nonceBytes), "a"))
	reply := make([]byte, helloFixed+1+proofBytes)
	if err := readFull(a, reply, "reply"); err != nil {
		t.Fatal(err)
	}
	a.Write(bytes.Repeat([]byte{0x5a}, proofBytes))
	if ce := connErr(t, <-errc, "handshake", ErrAuth); ce.Peer != "" {
		t.Errorf("the error names the dialer %q, which never proved it", ce.Peer)
	}
}

// A recorded handshake played again to the same listener (same key, same
// ID, a fresh nonce) fails: the proof covers the listener's nonce.
func TestHandshakeReplay(t *testing.T) {
	key := testKey(1)
	_, _, derr, lerr, dtap, _ := handshakePair(t, testConfig("a", key, 1), testConfig("b", key, 2), "b")
	if derr != nil || lerr != nil {
		t.Fatal(derr, lerr)
	}
	recorded := dtap.Written()
	// The same nonce replays, as it should: that is what a fresh one
	// changes.
	if _, err := Server(context.Background(), newWire(recorded), testConfig("b", key, 2)); err != nil {
		t.Fatalf("the recording against the same nonce: %v", err)
	}
	_, err := Server(context.Background(), newWire(recorded), testConfig("b", key, 3))
	connErr(t, err, "handshake", ErrAuth)
}

func TestHandshakeWrongPeer(t *testing.T) {
	key := testKey(1)
	_, _, derr, lerr, dtap, _ := handshakePair(t, testConfig("a", key, 1), testConfig("c", key, 2), "b")
	if ce := connErr(t, derr, "handshake", ErrWrongPeer); ce.Peer != "b" {
		t.Errorf("error names %q, want the peer dialed, b", ce.Peer)
	}
	connErr(t, lerr, "handshake", frames.ErrTruncated)
	if n := len(dtap.Written()); n != helloFixed+1 {
		t.Errorf("the dialer wrote %d bytes: it proved itself to the wrong node", n)
	}
}

// A node that reaches itself (its own address among its peers').
func TestHandshakeSelf(t *testing.T) {
	key := testKey(1)
	if _, err := Client(context.Background(), newWire(nil), testConfig("a", key, 1), "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Client to itself: %v", err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s, _ := testConfig("b", key, 1).settings()
	go handshake(context.Background(), a, s, true, "b")
	_, err := Server(context.Background(), b, testConfig("b", key, 2))
	connErr(t, err, "handshake", ErrWrongPeer)
}

// What the hello reader refuses, and as what.
func TestHandshakeMalformed(t *testing.T) {
	good := appendHello(nil, roleDialer, make([]byte, nonceBytes), "a")
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, frames.ErrTruncated},
		{"cut in the nonce", good[:20], frames.ErrTruncated},
		{"cut in the ID", edit(func(b []byte) []byte { b[helloFixed-1] = 5; return b }), frames.ErrTruncated},
		{"magic", edit(func(b []byte) []byte { b[0] = 'F'; return b }), frames.ErrUnknownKind},
		{"HTTP", append([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), make([]byte, 40)...), frames.ErrUnknownKind},
		// Version 1 is the frames without an actor: refused, as any other.
		{"version 2", edit(func(b []byte) []byte { b[8] = 2; return b }), frames.ErrUnknownKind},
		{"version 4", edit(func(b []byte) []byte { b[8] = 4; return b }), frames.ErrUnknownKind},
		{"role", edit(func(b []byte) []byte { b[9] = roleListener; return b }), frames.ErrCorrupt},
		{"empty ID", edit(func(b []byte) []byte { b[helloFixed-1] = 0; return b }), frames.ErrCorrupt},
		{"control character", edit(func(b []byte) []byte { b[helloFixed] = '\n'; return b }), frames.ErrCorrupt},
		{"not UTF-8", edit(func(b []byte) []byte { b[helloFixed] = 0xff; return b }), frames.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWire(c.in)
			_, err := Server(context.Background(), w, testConfig("b", testKey(1), 2))
			connErr(t, err, "handshake", c.want)
			if w.wrote.Len() != 0 {
				t.Errorf("the listener answered %d bytes to a hello it refused", w.wrote.Len())
			}
		})
	}
}

// A dialer that connects and says nothing is dropped after the timeout,
// and a cancelled context ends a handshake at once.
func TestHandshakeTimeoutAndCancel(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cfg := testConfig("b", testKey(1), 2)
	cfg.HandshakeTimeout = 20 * time.Millisecond
	_, err := Server(context.Background(), b, cfg)
	connErr(t, err, "handshake", os.ErrDeadlineExceeded)

	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = Server(ctx, d, testConfig("b", testKey(1), 2))
	connErr(t, err, "handshake", context.Canceled)
}

func TestWeakKey(t *testing.T) {
	for _, key := range [][]byte{nil, testKey(1)[:MinKeyBytes-1], make([]byte, 64), bytes.Repeat([]byte{0xff}, 32)} {
		cfg := Config{ID: "a", Key: key, Handler: func(follow.FollowerID, string, follow.Message) {}}
		if _, err := NewNode(cfg); !errors.Is(err, ErrWeakKey) {
			t.Errorf("NewNode with a key of %d bytes: %v", len(key), err)
		}
		if _, err := Client(context.Background(), newWire(nil), cfg, "b"); !errors.Is(err, ErrWeakKey) {
			t.Errorf("Client with a key of %d bytes: %v", len(key), err)
		}
		if _, err := Server(context.Background(), newWire(nil), cfg); !errors.Is(err, ErrWeakKey) {
			t.Errorf("Server with a key of %d bytes: %v", len(key), err)
		}
	}
	if _, err := NewNode(Config{ID: "a", Key: testKey(1), Handler: func(follow.FollowerID, string, follow.Message) {}}); err != nil {
		t.Fatalf("32 random bytes: %v", err)
	}
}

func TestConfigInvalid(t *testing.T) {
	h := func(follow.FollowerID, string, follow.Message) {}
	for name, cfg := range map[string]Config{
		"no ID":         {Key: testKey(1), Handler: h},
		"long ID":       {ID: follow.FollowerID(bytes.Repeat([]byte{'x'}, 256)), Key: testKey(1), Handler: h},
		"no handler":    {ID: "a", Key: testKey(1)},
		"huge messages": {ID: "a", Key: testKey(1), Handler: h, Limits: follow.Limits{MaxTailBytes: 1 << 32}},
		"queue":         {ID: "a", Key: testKey(1), Handler: h, MaxQueueBytes: -1},
	} {
		if _, err := NewNode(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
