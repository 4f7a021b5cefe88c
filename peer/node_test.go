package peer

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// fence is a distinct message for each i.
func fence(i int) follow.Message { return &follow.Fence{Epoch: frames.Epoch(i)} }

// A node sends to a peer it has the address of, for two actors
// interleaved; the peer, which has no address for it, answers each for
// its actor over the same connection, the one both actors share.
func TestNodeExchange(t *testing.T) {
	key := testKey(1)
	b := startNode(t, nodeConfig("b", key), "")
	b.in.reply = func(from follow.FollowerID, actor string, m follow.Message) {
		if err := b.Send(from, actor, &follow.Promise{Epoch: m.MsgEpoch()}); err != nil {
			t.Errorf("b answering: %v", err)
		}
	}
	a := startNode(t, nodeConfig("a", key), "")
	if err := a.SetAddr("b", b.addr); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 50; i++ {
		if err := a.Send("b", frameActor(i), fence(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a hears b's 50 answers", func() bool { return len(a.in.all()) == 50 })
	for i, r := range a.in.all() {
		if want := (&follow.Promise{Epoch: frames.Epoch(i + 1)}); r.from != "b" || r.actor != frameActor(i+1) || !reflect.DeepEqual(r.m, want) {
			t.Fatalf("answer %d: %s sent %#v for %s, want b's %#v for %s (in order)", i, r.from, r.m, r.actor, want, frameActor(i+1))
		}
	}
	for i, r := range b.in.all() {
		if r.from != "a" || r.actor != frameActor(i+1) || !reflect.DeepEqual(r.m, fence(i+1)) {
			t.Fatalf("message %d: %s sent %#v for %s, want for %s", i, r.from, r.m, r.actor, frameActor(i+1))
		}
	}
	if st := b.Stats(); st.Dials != 0 || st.Accepted != 1 || st.Sent != 50 || st.Delivered != 50 {
		t.Errorf("b's stats %+v: want no dial, one connection accepted, 50 each way", st)
	}
	if st := a.Stats(); st.Dials != 1 || st.Failed != 0 || st.Lost != 0 {
		t.Errorf("a's stats %+v", st)
	}
}

func TestNodeWrongKey(t *testing.T) {
	b := startNode(t, nodeConfig("b", testKey(2)), "")
	a := startNode(t, nodeConfig("a", testKey(1)), "")
	a.SetAddr("b", b.addr)
	if err := a.Send("b", testActor, fence(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's dial fails", func() bool { return a.Stats().Failed >= 2 })
	st := a.Stats()
	connErr(t, st.LastError, "handshake", ErrAuth)
	if ce := b.log.find("handshake", frames.ErrTruncated); ce == nil || ce.Peer != "" {
		t.Errorf("b: no handshake cut short by an unauthenticated dialer, logged %v", b.log.errs)
	}
	if st := b.Stats(); st.Delivered != 0 || st.Accepted != 0 {
		t.Errorf("b, with another key: %+v", st)
	}
	if st.Sent != 0 {
		t.Errorf("a sent %d messages to a node that has another key", st.Sent)
	}
}

// The address of b now hosts c (b moved, c took its port): a refuses it.
func TestNodeWrongPeer(t *testing.T) {
	key := testKey(1)
	c := startNode(t, nodeConfig("c", key), "")
	a := startNode(t, nodeConfig("a", key), "")
	a.SetAddr("b", c.addr)
	a.Send("b", testActor, fence(1))
	waitFor(t, "a's dial fails", func() bool { return a.Stats().Failed >= 1 })
	if ce := connErr(t, a.Stats().LastError, "handshake", ErrWrongPeer); ce.Peer != "b" {
		t.Errorf("error names %q", ce.Peer)
	}
	if st := c.Stats(); st.Delivered != 0 || st.Accepted != 0 {
		t.Errorf("c: %+v", st)
	}
}

// A bit flipped on the wire, in each part of the handshake and of a frame,
// each way: the connection ends with the error drawn in doc.go, the
// altered frame is never delivered, and the nodes reconnect and go on.
func TestNodeTamperedOnTheWire(t *testing.T) {
	dialerHello := helloFixed + 1 // "a"
	listenerHello := helloFixed + 1
	firstToListener := dialerHello + proofBytes
	firstToDialer := listenerHello + proofBytes
	for _, c := range []struct {
		name       string
		toListener bool
		at         int
		at_a       bool // the error is the dialer's, a's (else b's)
		op         string
		want       error
		peer       follow.FollowerID
		tampered   bool // the first message that way is altered (else a handshake)
	}{
		{"dialer's nonce", true, 20, true, "handshake", ErrAuth, "b", false},
		{"dialer's ID length", true, helloFixed - 1, false, "handshake", frames.ErrCorrupt, "", false},
		{"listener's nonce", false, 20, true, "handshake", ErrAuth, "b", false},
		{"listener's proof", false, listenerHello + 5, true, "handshake", ErrAuth, "b", false},
		{"dialer's proof", true, dialerHello + 5, false, "handshake", ErrAuth, "", false},
		{"frame length", true, firstToListener + 2, false, "receive", ErrAuth, "a", true},
		{"frame header MAC", true, firstToListener + lengthBytes + 3, false, "receive", ErrAuth, "a", true},
		{"frame actor length", true, firstToListener + headerBytes, false, "receive", ErrAuth, "a", true},
		{"frame actor", true, firstToListener + headerBytes + 2, false, "receive", ErrAuth, "a", true},
		{"frame message", true, firstToListener + headerBytes + 1 + len(testActor) + 3, false, "receive", ErrAuth, "a", true},
		{"frame MAC", true, firstToListener + headerBytes + 1 + len(testActor) + 10 + 4 + 7, false, "receive", ErrAuth, "a", true},
		{"answer payload", false, firstToDialer + headerBytes + 3, true, "receive", ErrAuth, "b", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := testKey(1)
			b := startNode(t, nodeConfig("b", key), "")
			var answered atomic.Int64
			b.in.reply = func(from follow.FollowerID, actor string, m follow.Message) {
				answered.Add(1)
				b.Send(from, actor, &follow.Ack{Epoch: m.MsgEpoch()})
			}
			p := startProxy(t, b.addr, flipAt(c.toListener, c.at))
			a := startNode(t, nodeConfig("a", key), "")
			a.SetAddr("b", p.addr())
			// Send until an answer comes back, whatever the flip broke.
			for i := 1; len(a.in.all()) == 0; i++ {
				if i > 3000 {
					t.Fatal("no answer after 3000 messages")
				}
				a.Send("b", testActor, fence(i))
				time.Sleep(10 * time.Millisecond)
			}
			log := b.log
			if c.at_a {
				log = a.log
			}
			ce := log.find(c.op, c.want)
			if ce == nil {
				t.Fatalf("no %s error matching %v; logged: %v", c.op, c.want, log.errs)
			}
			if ce.Peer != c.peer {
				t.Errorf("error names peer %q, want %q", ce.Peer, c.peer)
			}
			if c.tampered && c.toListener && b.in.has(fence(1)) {
				t.Errorf("b delivered the altered first message")
			}
			if c.tampered && !c.toListener && a.in.has(&follow.Ack{Epoch: 1}) {
				t.Errorf("a delivered the altered first answer")
			}
			if a.Stats().Dials < 2 {
				t.Errorf("a dialed %d times: the broken connection was not replaced", a.Stats().Dials)
			}
		})
	}
}

// A peer that authenticated but sends a frame longer than the bound: its
// connection ends before the frame is read.
func TestNodeOversizedFrame(t *testing.T) {
	key := testKey(1)
	b := startNode(t, nodeConfig("b", key), "")
	raw, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c, err := Client(t.Context(), raw, nodeConfig("a", key), "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(testActor, fence(1)); err != nil {
		t.Fatal(err)
	}
	n := uint32(maxActorPrefix + follow.Limits{}.MaxMessageBytes() + 1)
	hdr := binary.LittleEndian.AppendUint32(nil, n)
	raw.Write(append(hdr, headerMAC(c.sendMAC, c.sendSeq, hdr)...))
	waitFor(t, "b refuses the frame", func() bool { return b.Stats().Failed >= 1 })
	if ce := connErr(t, b.Stats().LastError, "receive", frames.ErrTooLarge); ce.Peer != "a" {
		t.Errorf("error names %q", ce.Peer)
	}
	if got := b.in.all(); len(got) != 1 || !reflect.DeepEqual(got[0].m, fence(1)) {
		t.Errorf("b delivered %v, want the one whole frame", got)
	}
	raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); err == nil {
		t.Errorf("b left the connection open")
	}
}

// A peer that restarts at the same address, then moves to another.
func TestNodeReconnect(t *testing.T) {
	key := testKey(1)
	b := startNode(t, nodeConfig("b", key), "")
	a := startNode(t, nodeConfig("a", key), "")
	a.SetAddr("b", b.addr)
	i := 0
	sendUntil := func(to *testNode) {
		t.Helper()
		waitFor(t, "a message reaches "+to.addr, func() bool {
			i++
			a.Send("b", testActor, fence(i))
			return len(to.in.all()) > 0
		})
	}
	sendUntil(b)
	b.Close()
	b2 := startNode(t, nodeConfig("b", key), b.addr)
	sendUntil(b2)
	if d := a.Stats().Dials; d < 2 {
		t.Errorf("%d dials across a restart", d)
	}
	b2.Close()
	b3 := startNode(t, nodeConfig("b", key), "")
	a.SetAddr("b", b3.addr)
	sendUntil(b3)
	// Whatever was lost, nothing came twice or out of order.
	for _, n := range []*testNode{b, b2, b3} {
		last := frames.Epoch(0)
		for _, r := range n.in.all() {
			if e := r.m.MsgEpoch(); e <= last {
				t.Fatalf("%s delivered epoch %d after %d", n.addr, e, last)
			} else {
				last = e
			}
		}
	}
}

// A peer that stops reading: its queue fills and Send refuses at once,
// with bounded memory; once it reads again everything queued arrives, in
// order, none lost.
func TestNodeBackpressure(t *testing.T) {
	key := testKey(1)
	release := make(chan struct{})
	var gotFirst atomic.Bool
	var bin inbox
	bcfg := nodeConfig("b", key)
	bcfg.Handler = func(from follow.FollowerID, actor string, m follow.Message) {
		if gotFirst.CompareAndSwap(false, true) {
			<-release
		}
		bin.handle(from, actor, m)
	}
	b := startNode(t, bcfg, "")
	acfg := nodeConfig("a", key)
	acfg.MaxQueueBytes = 1 << 20
	acfg.StallTimeout = -1 // this test holds b for as long as it takes
	a := startNode(t, acfg, "")
	a.SetAddr("b", b.addr)

	body := make([]byte, 64<<10)
	msg := func(i int) follow.Message {
		return &follow.Append{Epoch: frames.Epoch(i), Entries: []follow.Entry{{Seq: 1, After: 1, Body: body}}}
	}
	size := int64(len(body) + 100)
	accepted, refusedInARow := 0, 0
	for refusedInARow < 500 {
		if int64(accepted)*size > 1<<30 {
			t.Fatalf("a took %d messages (%d MiB) for a peer that reads nothing: not back-pressured", accepted, int64(accepted)*size>>20)
		}
		switch err := a.Send("b", testActor, msg(accepted+1)); {
		case err == nil:
			accepted++
			refusedInARow = 0
		case errors.Is(err, ErrBackpressure):
			refusedInARow++
			time.Sleep(time.Millisecond)
		default:
			t.Fatal(err)
		}
		if q := a.Stats().Queued; q > acfg.MaxQueueBytes+size {
			t.Fatalf("%d bytes queued, past the bound", q)
		}
	}
	if a.Stats().Refused == 0 {
		t.Fatal("nothing refused")
	}
	t.Logf("a took %d messages of %d KiB before refusing (its queue, the kernel's buffers, b's first)", accepted, size>>10)
	close(release)
	waitFor(t, "b gets everything a took", func() bool { return len(bin.all()) == accepted })
	for i, r := range bin.all() {
		if r.m.MsgEpoch() != frames.Epoch(i+1) {
			t.Fatalf("message %d is epoch %d", i, r.m.MsgEpoch())
		}
	}
	if st := a.Stats(); st.Lost != 0 || st.Failed != 0 {
		t.Errorf("a: %+v", st)
	}
}

func TestNodeNoRoute(t *testing.T) {
	key := testKey(1)
	a := startNode(t, nodeConfig("a", key), "")
	if err := a.Send("b", testActor, fence(1)); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("to a peer unknown: %v", err)
	}
	b := startNode(t, nodeConfig("b", key), "")
	b.SetAddr("a", a.addr)
	b.Send("a", testActor, fence(1))
	waitFor(t, "a hears b", func() bool { return len(a.in.all()) == 1 })
	// Now a reaches b over b's connection.
	if err := a.Send("b", testActor, fence(2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b hears a", func() bool { return len(b.in.all()) == 1 })
	b.Close()
	waitFor(t, "a sees b gone", func() bool { return errors.Is(a.Send("b", testActor, fence(3)), ErrNoRoute) })
}

func TestNodeSendRefused(t *testing.T) {
	a := startNode(t, nodeConfig("a", testKey(1)), "")
	a.SetAddr("b", "127.0.0.1:1")
	for name, err := range map[string]error{
		"to itself":          a.Send("a", testActor, fence(1)),
		"epoch 0":            a.Send("b", testActor, &follow.Fence{}),
		"no actor":           a.Send("b", "", fence(1)),
		"actor of 121 bytes": a.Send("b", strings.Repeat("x", follow.MaxActorBytes+1), fence(1)),
		"past the bound": a.Send("b", testActor, &follow.Append{Epoch: 1, Reset: true,
			Entries: []follow.Entry{{Seq: 1, After: 1, Body: make([]byte, follow.DefaultMaxTailBytes+4096)}}}),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if st := a.Stats(); st.Queued != 0 {
		t.Errorf("refused sends left %d bytes queued", st.Queued)
	}
	if err := a.SetAddr("b", "nowhere"); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetAddr without a port: %v", err)
	}
	a.Close()
	if err := a.Send("b", testActor, fence(1)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// A peer's queue counts each message as its whole frame, header, actor
// and MAC included: the bound refuses the frame that would pass it, even
// when the messages alone would fit.
func TestNodeQueueCountsFrames(t *testing.T) {
	actor := strings.Repeat("x", follow.MaxActorBytes)
	message, err := follow.AppendMessage(nil, fence(1), follow.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	frame := int64(lengthBytes + headerMACBytes + 1 + len(actor) + len(message) + macBytes)
	cfg := nodeConfig("a", testKey(1))
	cfg.MaxQueueBytes = 2*frame - 1
	cfg.Handler = func(follow.FollowerID, string, follow.Message) {}
	a, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// A port nothing listens on: the dials fail, and the queue holds.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	a.SetAddr("b", ln.Addr().String())
	if err := a.Send("b", actor, fence(1)); err != nil {
		t.Fatal(err)
	}
	if q := a.Stats().Queued; q != frame {
		t.Fatalf("one message queued counts %d bytes, its frame is %d", q, frame)
	}
	if err := a.Send("b", actor, fence(2)); !errors.Is(err, ErrBackpressure) {
		t.Fatalf("a second frame of %d bytes past the bound of %d: %v", frame, cfg.MaxQueueBytes, err)
	}
}

// Connections that never finish their handshake hold at most
// maxHandshakes slots; one more is closed at once.
func TestNodeHandshakeLimit(t *testing.T) {
	cfg := nodeConfig("b", testKey(1))
	cfg.HandshakeTimeout = time.Hour
	b := startNode(t, cfg, "")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxHandshakes + 1 {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitFor(t, "one connection refused", func() bool { return b.Stats().Failed == 1 })
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "every idle handshake ends", func() bool { return b.Stats().Failed == maxHandshakes+1 })
	a := startNode(t, nodeConfig("a", testKey(1)), "")
	a.SetAddr("b", b.addr)
	a.Send("b", testActor, fence(1))
	waitFor(t, "a gets through", func() bool { return len(b.in.all()) == 1 })
}

// A peer that stops reading for longer than StallTimeout: the write ends
// the connection (the message being written is lost, and counted), and
// the node dials again once the peer reads.
func TestNodeStall(t *testing.T) {
	key := testKey(1)
	release := make(chan struct{})
	var held atomic.Bool
	bcfg := nodeConfig("b", key)
	var bin inbox
	bcfg.Handler = func(from follow.FollowerID, actor string, m follow.Message) {
		if held.CompareAndSwap(false, true) {
			<-release
		}
		bin.handle(from, actor, m)
	}
	b := startNode(t, bcfg, "")
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	acfg := nodeConfig("a", key)
	acfg.StallTimeout = 50 * time.Millisecond
	a := startNode(t, acfg, "")
	a.SetAddr("b", b.addr)
	body := make([]byte, 256<<10)
	for i := 1; a.log.find("send", os.ErrDeadlineExceeded) == nil; i++ {
		if i > 10000 {
			t.Fatalf("no write stalled: %+v, logged %v", a.Stats(), a.log.errs)
		}
		if err := a.Send("b", testActor, &follow.Append{Epoch: frames.Epoch(i), Entries: []follow.Entry{{Seq: 1, After: 1, Body: body}}}); err != nil && !errors.Is(err, ErrBackpressure) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if a.Stats().Lost == 0 {
		t.Error("the message being written when the connection ended is not counted lost")
	}
	close(release)
	n := len(bin.all())
	a.Send("b", testActor, fence(1<<20))
	waitFor(t, "a reaches b again", func() bool { return bin.has(fence(1 << 20)) })
	if len(bin.all()) <= n {
		t.Error("nothing arrived after the stall")
	}
}

// Both nodes dial each other: each has two connections, both read, and
// each node's messages still arrive in order.
func TestNodeBothDial(t *testing.T) {
	key := testKey(1)
	a := startNode(t, nodeConfig("a", key), "")
	b := startNode(t, nodeConfig("b", key), "")
	a.SetAddr("b", b.addr)
	b.SetAddr("a", a.addr)
	const n = 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			b.Send("a", testActor, fence(i))
		}
	}()
	for i := 1; i <= n; i++ {
		a.Send("b", testActor, fence(i))
	}
	<-done
	waitFor(t, "both get everything", func() bool { return len(a.in.all()) == n && len(b.in.all()) == n })
	for _, x := range []*testNode{a, b} {
		for i, r := range x.in.all() {
			if r.m.MsgEpoch() != frames.Epoch(i+1) {
				t.Fatalf("%s: message %d is epoch %d", x.ID(), i, r.m.MsgEpoch())
			}
		}
	}
	if a.Stats().Dials != 1 || b.Stats().Dials != 1 {
		t.Errorf("dials: a %d, b %d", a.Stats().Dials, b.Stats().Dials)
	}
}

func TestBackoff(t *testing.T) {
	if d := backoff(0); d != 0 {
		t.Errorf("first dial waits %v", d)
	}
	for _, c := range []struct {
		failures int
		lo, hi   time.Duration
	}{{1, 25 * time.Millisecond, 50 * time.Millisecond}, {2, 50 * time.Millisecond, 100 * time.Millisecond},
		{7, 1600 * time.Millisecond, 3200 * time.Millisecond}, {8, 2500 * time.Millisecond, 5 * time.Second}, {1000, 2500 * time.Millisecond, 5 * time.Second}} {
		for range 100 {
			if d := backoff(c.failures); d < c.lo || d > c.hi {
				t.Fatalf("after %d failures: %v, want %v..%v", c.failures, d, c.lo, c.hi)
			}
		}
	}
}
