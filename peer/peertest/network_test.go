package peertest

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/peer"
)

// recorder is a transport that keeps what it is sent.
type recorder struct {
	mu  sync.Mutex
	got []sent
}

type sent struct {
	to    follow.FollowerID
	actor string
	m     follow.Message
	at    time.Time
}

func (r *recorder) Send(to follow.FollowerID, actor string, m follow.Message) error {
	r.mu.Lock()
	r.got = append(r.got, sent{to, actor, m, time.Now()})
	r.mu.Unlock()
	return nil
}

func (r *recorder) epochs() []frames.Epoch {
	r.mu.Lock()
	defer r.mu.Unlock()
	var e []frames.Epoch
	for _, s := range r.got {
		e = append(e, s.m.MsgEpoch())
	}
	return e
}

// actors is what each epoch's message was sent for, in the order sent on.
func (r *recorder) actors() map[frames.Epoch][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := map[frames.Epoch][]string{}
	for _, s := range r.got {
		a[s.m.MsgEpoch()] = append(a[s.m.MsgEpoch()], s.actor)
	}
	return a
}

// actorOf is the actor sendAll sends message i for: two, alternating.
func actorOf(i int) string { return []string{"db-1", "db-2"}[i%2] }

func fence(i int) follow.Message { return &follow.Fence{Epoch: frames.Epoch(i)} }

func sendAll(t *testing.T, tr peer.Transport, to follow.FollowerID, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if err := tr.Send(to, actorOf(i), fence(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNoFaults(t *testing.T) {
	n := New(1)
	var r recorder
	sendAll(t, n.Transport("a", &r), "b", 5)
	if got := r.epochs(); !reflect.DeepEqual(got, []frames.Epoch{1, 2, 3, 4, 5}) {
		t.Fatalf("got %v", got)
	}
	if st := n.Stats(); st != (Stats{Sent: 5}) {
		t.Errorf("stats %+v", st)
	}
}

func TestDrop(t *testing.T) {
	n := New(1)
	n.Set(Rules{Drop: 1})
	var r recorder
	sendAll(t, n.Transport("a", &r), "b", 5)
	if got := r.epochs(); len(got) != 0 || n.Stats().Dropped != 5 {
		t.Fatalf("drop 1: got %v, %+v", got, n.Stats())
	}
	// Half, reproducibly for a seed.
	run := func(seed uint64) []frames.Epoch {
		n := New(seed)
		n.Set(Rules{Drop: 0.5})
		var r recorder
		sendAll(t, n.Transport("a", &r), "b", 200)
		if st := n.Stats(); st.Dropped+len(r.epochs()) != 200 || st.Dropped < 50 || st.Dropped > 150 {
			t.Fatalf("drop 0.5: %+v, %d through", st, len(r.epochs()))
		}
		return r.epochs()
	}
	if a, b := run(7), run(7); !reflect.DeepEqual(a, b) {
		t.Error("the same seed dropped different messages")
	}
	if a, b := run(7), run(8); reflect.DeepEqual(a, b) {
		t.Error("two seeds dropped the same 100-odd of 200 messages")
	}
}

func TestDuplicate(t *testing.T) {
	n := New(1)
	n.Set(Rules{Duplicate: 1})
	var r recorder
	sendAll(t, n.Transport("a", &r), "b", 3)
	if got := r.epochs(); !reflect.DeepEqual(got, []frames.Epoch{1, 1, 2, 2, 3, 3}) {
		t.Fatalf("got %v", got)
	}
}

func TestReorder(t *testing.T) {
	n := New(1)
	n.Set(Rules{Reorder: 1, HoldMax: time.Hour})
	var r recorder
	tr := n.Transport("a", &r)
	sendAll(t, tr, "b", 4)
	if got := r.epochs(); !reflect.DeepEqual(got, []frames.Epoch{2, 1, 4, 3}) {
		t.Fatalf("got %v", got)
	}
	// Held per pair: a message to c does not release one to b.
	tr.Send("b", actorOf(5), fence(5))
	tr.Send("c", actorOf(6), fence(6))
	if got := r.epochs(); len(got) != 4 {
		t.Fatalf("got %v", got)
	}
	// A message held with nothing after it goes when its hold runs out.
	n.Set(Rules{Reorder: 1, HoldMax: time.Millisecond})
	var r2 recorder
	n.Transport("x", &r2).Send("y", actorOf(1), fence(1))
	waitFor(t, "the held message goes", func() bool { return len(r2.epochs()) == 1 })
	if st := n.Stats(); st.Reordered != 2 {
		t.Errorf("stats %+v", st)
	}
}

// Each message waits its delay at least (a timer never fires early): a
// lower bound, never a threshold that a slow machine can miss.
func TestDelay(t *testing.T) {
	n := New(1)
	const d = 20 * time.Millisecond
	n.Set(Rules{DelayMin: d, DelayMax: d})
	var r recorder
	tr := n.Transport("a", &r)
	start := time.Now()
	sendAll(t, tr, "b", 3)
	waitFor(t, "three delayed messages", func() bool { return len(r.epochs()) == 3 })
	for _, s := range r.got {
		if s.at.Sub(start) < d {
			t.Errorf("epoch %d arrived %v after Send, before its delay of %v", s.m.MsgEpoch(), s.at.Sub(start), d)
		}
	}
	if st := n.Stats(); st.Delayed != 3 || st.Sent != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestPartition(t *testing.T) {
	n := New(1)
	var ra, rb recorder
	var mu sync.Mutex
	var inA []follow.FollowerID
	var actorsA []string
	ha := n.Handler("a", func(from follow.FollowerID, actor string, m follow.Message) {
		mu.Lock()
		inA, actorsA = append(inA, from), append(actorsA, actor)
		mu.Unlock()
	})
	a, b := n.Transport("a", &ra), n.Transport("b", &rb)
	n.Partition("a", "b")
	a.Send("b", actorOf(1), fence(1))
	b.Send("a", actorOf(2), fence(2))
	a.Send("c", actorOf(3), fence(3))
	ha("b", actorOf(4), fence(4)) // in flight when the cut came
	ha("c", actorOf(5), fence(5))
	if got := ra.epochs(); !reflect.DeepEqual(got, []frames.Epoch{3}) {
		t.Errorf("a sent %v through, want only to c", got)
	}
	if got := rb.epochs(); len(got) != 0 {
		t.Errorf("b sent %v through", got)
	}
	if !reflect.DeepEqual(inA, []follow.FollowerID{"c"}) || !reflect.DeepEqual(actorsA, []string{actorOf(5)}) {
		t.Errorf("a received from %v, for %v", inA, actorsA)
	}
	n.Heal("b", "a")
	a.Send("b", actorOf(6), fence(6))
	ha("b", actorOf(7), fence(7))
	if got := ra.epochs(); !reflect.DeepEqual(got, []frames.Epoch{3, 6}) || len(inA) != 2 {
		t.Errorf("after Heal: sent %v, received from %v", got, inA)
	}
	n.Partition("a", "b")
	n.Partition("a", "c")
	n.HealAll()
	a.Send("b", actorOf(8), fence(8))
	a.Send("c", actorOf(9), fence(9))
	if got := ra.epochs(); len(got) != 4 {
		t.Errorf("after HealAll: %v", got)
	}
	if st := n.Stats(); st.Partitioned != 3 {
		t.Errorf("stats %+v", st)
	}
}

// A delayed message in flight when a partition comes is lost.
func TestPartitionInFlight(t *testing.T) {
	n := New(1)
	n.Set(Rules{DelayMin: 10 * time.Millisecond, DelayMax: 10 * time.Millisecond})
	var r recorder
	n.Transport("a", &r).Send("b", actorOf(1), fence(1))
	n.Partition("a", "b")
	waitFor(t, "the delay ends", func() bool { return n.Stats().Partitioned == 1 })
	if got := r.epochs(); len(got) != 0 {
		t.Errorf("sent %v across the cut", got)
	}
}

func TestClose(t *testing.T) {
	n := New(1)
	n.Set(Rules{DelayMin: time.Hour, DelayMax: time.Hour})
	var r recorder
	tr := n.Transport("a", &r)
	tr.Send("b", actorOf(1), fence(1))
	n.Close()
	if err := tr.Send("b", actorOf(2), fence(2)); !errors.Is(err, peer.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if len(r.epochs()) != 0 {
		t.Error("Close delivered what it held")
	}
}

func TestRulesInvalid(t *testing.T) {
	n := New(1)
	for _, r := range []Rules{{Drop: -0.1}, {Duplicate: 1.5}, {DelayMin: 2, DelayMax: 1}, {HoldMax: -1}} {
		if err := n.Set(r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

// Every path a message takes through the network keeps the actor it was
// sent for: at once, copied, held back behind the next (for the other
// actor) or until its hold runs out, delayed.
func TestActorsCarried(t *testing.T) {
	for _, c := range []struct {
		name   string
		rules  Rules
		copies int
	}{
		{"at once", Rules{}, 1},
		{"copied", Rules{Duplicate: 1}, 2},
		{"reordered", Rules{Reorder: 1, HoldMax: time.Millisecond}, 1},
		{"delayed", Rules{DelayMin: time.Millisecond, DelayMax: 5 * time.Millisecond}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := New(1)
			defer n.Close()
			if err := n.Set(c.rules); err != nil {
				t.Fatal(err)
			}
			var r recorder
			sendAll(t, n.Transport("a", &r), "b", 5)
			waitFor(t, "every message through", func() bool { return len(r.epochs()) == 5*c.copies })
			for e, actors := range r.actors() {
				if len(actors) != c.copies {
					t.Errorf("epoch %d went %d times, want %d", e, len(actors), c.copies)
				}
				for _, a := range actors {
					if a != actorOf(int(e)) {
						t.Errorf("epoch %d, sent for %s, went for %s", e, actorOf(int(e)), a)
					}
				}
			}
		})
	}
}
