package peer

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
)

// A connection that carries nothing still beats, so neither end falls
// silent; once one end is gone the other suspects it after SuspectAfter,
// and not before.
func TestHeartbeatsAndSilence(t *testing.T) {
	key := testKey(1)
	b := startNode(t, nodeConfig("b", key), "")
	a := startNode(t, nodeConfig("a", key), "")
	if v := b.Silence("a"); v.Known {
		t.Fatalf("b knows of a before any connection: %+v", v)
	}
	a.SetAddr("b", b.addr)
	if err := a.Send("b", testActor, fence(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b gets the message", func() bool { return len(b.in.all()) == 1 })
	// Idle for eight heartbeats: both still hear each other.
	for range 16 {
		time.Sleep(DefaultHeartbeat / 2)
		for _, c := range []struct {
			n    *testNode
			peer follow.FollowerID
		}{{a, "b"}, {b, "a"}} {
			if v := c.n.Silence(c.peer); !v.Known || v.Suspected || v.Silence >= DefaultSuspectAfter {
				t.Fatalf("%s of an idle, live %s: %+v", c.n.ID(), c.peer, v)
			}
		}
	}
	closed := time.Now()
	a.Close()
	waitFor(t, "b suspects a", func() bool { return b.Silence("a").Suspected })
	// Silence counts from the last frame, a beat or so before the close.
	if d := time.Since(closed); d < DefaultSuspectAfter-2*DefaultHeartbeat {
		t.Fatalf("b suspected a %v after it closed, sooner than SuspectAfter %v allows", d, DefaultSuspectAfter)
	}
}

// A Handler that takes its time (a follower's fsync) does not stop the
// connection's reader: heartbeats are read meanwhile, and the sender is
// never suspected because the receiver was busy.
func TestSlowHandlerKeepsHearing(t *testing.T) {
	key := testKey(1)
	release := make(chan struct{})
	cfg := nodeConfig("b", key)
	cfg.Handler = func(follow.FollowerID, string, follow.Message) { <-release }
	b := startNode(t, cfg, "")
	a := startNode(t, nodeConfig("a", key), "")
	a.SetAddr("b", b.addr)
	for i := range 3 {
		if err := a.Send("b", testActor, fence(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b hears a", func() bool { return b.Silence("a").Known })
	deadline := time.Now().Add(3 * DefaultSuspectAfter)
	for time.Now().Before(deadline) {
		if v := b.Silence("a"); v.Suspected {
			t.Fatalf("b suspects a while its Handler is busy: %+v", v)
		}
		if v := a.Silence("b"); v.Suspected {
			t.Fatalf("a suspects b while b's Handler is busy: %+v", v)
		}
		time.Sleep(DefaultHeartbeat)
	}
	close(release)
	waitFor(t, "b's Handler took all three", func() bool { return b.Stats().Delivered == 3 })
}

// Ask carries the question to an observer and its answer back: what the
// observer hears of the subject, judged by the asker's SuspectAfter.
func TestAsk(t *testing.T) {
	key := testKey(1)
	obs := startNode(t, nodeConfig("obs", key), "")
	subj := startNode(t, nodeConfig("subj", key), "")
	asker := startNode(t, nodeConfig("asker", key), "")
	subj.SetAddr("obs", obs.addr)
	asker.SetAddr("obs", obs.addr)
	if err := subj.Send("obs", testActor, fence(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "obs hears subj", func() bool { return obs.Silence("subj").Known })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v, err := asker.Ask(ctx, "obs", "subj")
	if err != nil || !v.Known || v.Suspected {
		t.Fatalf("asking about a live subject: %+v, %v", v, err)
	}
	if v, err := asker.Ask(ctx, "obs", "nobody"); err != nil || v.Known {
		t.Fatalf("asking about a node obs never heard: %+v, %v", v, err)
	}
	if v, err := asker.Ask(ctx, "obs", "obs"); err != nil || !v.Known || v.Suspected {
		t.Fatalf("asking obs about itself: %+v, %v", v, err)
	}
	subj.Close()
	waitFor(t, "obs suspects subj", func() bool { return obs.Silence("subj").Suspected })
	if v, err := asker.Ask(ctx, "obs", "subj"); err != nil || !v.Known || !v.Suspected || v.Silence < DefaultSuspectAfter {
		t.Fatalf("asking about a closed subject: %+v, %v", v, err)
	}
	// An observer that cannot be reached: no answer, the context's error.
	short, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel2()
	asker.SetAddr("gone", subj.addr)
	if _, err := asker.Ask(short, "gone", "subj"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("asking a closed node: %v", err)
	}
}

// Watch dials a peer never talked to, and counts its silence from then:
// a live one is heard within a beat, one that is not there is suspected
// SuspectAfter later.
func TestWatch(t *testing.T) {
	key := testKey(1)
	b := startNode(t, nodeConfig("b", key), "")
	a := startNode(t, nodeConfig("a", key), "")
	a.SetAddr("b", b.addr)
	if err := a.Watch("b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a hears b", func() bool { v := a.Silence("b"); return v.Known && v.Silence < DefaultHeartbeat*3 })
	waitFor(t, "b, watched by a, hears a", func() bool { return b.Silence("a").Known })
	if err := a.Watch("nowhere"); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("watching a node without an address: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // nothing listens there
	a.SetAddr("gone", ln.Addr().String())
	start := time.Now()
	if err := a.Watch("gone"); err != nil {
		t.Fatal(err)
	}
	if v := a.Silence("gone"); !v.Known || v.Suspected {
		t.Fatalf("just watched: %+v", v)
	}
	waitFor(t, "a suspects the node that is not there", func() bool { return a.Silence("gone").Suspected })
	if d := time.Since(start); d < DefaultSuspectAfter {
		t.Fatalf("suspected %v after the watch began", d)
	}
}

// A peer heard again after a silence stays suspected for TrustAfter: a
// flapping link does not make it come and go.
func TestTrustAfterSilence(t *testing.T) {
	key := testKey(1)
	bcfg := nodeConfig("b", key)
	bcfg.Heartbeat, bcfg.SuspectAfter, bcfg.TrustAfter = 20*time.Millisecond, 100*time.Millisecond, time.Hour
	b := startNode(t, bcfg, "")
	acfg := nodeConfig("a", key)
	acfg.Heartbeat, acfg.SuspectAfter = 400*time.Millisecond, time.Second // beats more slowly than b suspects
	a := startNode(t, acfg, "")
	a.SetAddr("b", b.addr)
	if err := a.Send("b", testActor, fence(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b suspects a between its beats", func() bool { return b.Silence("a").Suspected })
	waitFor(t, "b hears a again", func() bool { return b.Silence("a").Silence < 50*time.Millisecond })
	if v := b.Silence("a"); !v.Suspected {
		t.Fatalf("heard again after a silence, and trusted at once: %+v", v)
	}
}

func TestHeartbeatConfig(t *testing.T) {
	cfg := nodeConfig("a", testKey(1))
	cfg.Heartbeat, cfg.SuspectAfter = time.Second, time.Second
	cfg.Handler = func(follow.FollowerID, string, follow.Message) {}
	if _, err := NewNode(cfg); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SuspectAfter of one heartbeat: %v", err)
	}
}
