package follow

import (
	"slices"
	"testing"
	"time"
)

// gcCluster is a cluster whose owner sends through GroupCommit, with the
// network in the test's hands: messages wait in net until delivered.
type gcCluster struct {
	t         *testing.T
	o         *Owner
	gc        *GroupCommit
	followers map[FollowerID]*Follower
	net       []Envelope
	handled   map[FollowerID]int // Appends each follower took
}

func newGCCluster(t *testing.T, q int, set ...FollowerID) *gcCluster {
	t.Helper()
	o, err := NewOwner(Recovery{Epoch: 1, Quorum: q, Followers: set}, OwnerConfig{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	c := &gcCluster{t: t, o: o, gc: NewGroupCommit(0), followers: map[FollowerID]*Follower{}, handled: map[FollowerID]int{}}
	for _, id := range set {
		c.followers[id] = NewFollower(Limits{})
	}
	c.flush(t0)
	return c
}

func (c *gcCluster) flush(now time.Time) { c.net = append(c.net, c.gc.Route(c.o.Outbox(), now)...) }

func (c *gcCluster) append(es ...Entry) {
	c.t.Helper()
	for _, e := range es {
		if err := c.o.Append(e); err != nil {
			c.t.Fatalf("Append(%d): %v", e.Seq, err)
		}
		c.flush(t0)
	}
}

// deliverAll delivers what is in flight, and the replies, until nothing is.
func (c *gcCluster) deliverAll() {
	c.t.Helper()
	for range 1000 {
		if len(c.net) == 0 {
			return
		}
		e := c.net[0]
		c.net = c.net[1:]
		reply := c.followers[e.To].Handle(e.Msg)
		if _, ok := e.Msg.(*Append); ok {
			c.handled[e.To]++
		}
		c.net = append(c.net, c.gc.Receive(e.To, reply, t0)...)
		c.o.Receive(e.To, reply)
		c.flush(t0)
	}
	c.t.Fatal("messages never stopped")
}

// appends returns the Appends in out, checking that nothing else is there.
func appends(t *testing.T, out []Envelope) []*Append {
	t.Helper()
	var as []*Append
	for _, e := range out {
		a, ok := e.Msg.(*Append)
		if !ok {
			t.Fatalf("%s to %s: not an Append", describe(e.Msg), e.To)
		}
		as = append(as, a)
	}
	return as
}

// While an Append waits for its answer, the owner's next ones are merged
// into one, sent with the answer: a follower takes two Appends for ten
// commits, and holds them all.
func TestGroupCommitMerges(t *testing.T) {
	c := newGCCluster(t, 2, abc...)
	c.deliverAll() // the resets
	es := entries(Point{}, 10, 1)
	c.append(es...)
	sent := appends(t, c.net)
	for _, a := range sent {
		if len(a.Entries) != 1 || a.Entries[0].Seq != 1 {
			t.Fatalf("sent %s before any answer; want seq 1 alone", describe(a))
		}
	}
	if len(sent) != 3 {
		t.Fatalf("sent %d messages before any answer; want one to each of 3", len(sent))
	}
	c.deliverAll()
	for _, id := range abc {
		if c.handled[id] != 3 { // the reset, seq 1, seqs 2..10 merged
			t.Errorf("%s took %d Appends; want 3", id, c.handled[id])
		}
		if st := c.followers[id].State(); st.End() != es[9].Point() {
			t.Errorf("%s holds through %d; want 10", id, st.End().Seq)
		}
	}
	if c.o.Acked() != 10 {
		t.Fatalf("acknowledged %d; want 10", c.o.Acked())
	}
}

// The merged Append is the one the owner would have sent had it sent once:
// the first one's Prev, every entry, the last one's durable point.
func TestGroupCommitMergedAppend(t *testing.T) {
	g := NewGroupCommit(0)
	es := entries(Point{}, 4, 1)
	a := &Append{Epoch: 1, Prev: Point{}, Entries: es[:1]}
	b := &Append{Epoch: 1, Prev: es[0].Point(), Entries: es[1:2]}
	d := &Append{Epoch: 1, Prev: es[1].Point(), Durable: es[0].Point(), Entries: es[2:4]}
	out := g.Route([]Envelope{{"a", a}, {"a", b}, {"a", d}}, t0)
	if len(out) != 1 || out[0].Msg != a {
		t.Fatalf("sent %d messages; want the first alone", len(out))
	}
	out = g.Receive("a", &Ack{Epoch: 1, End: es[0].Point()}, t0)
	if len(out) != 1 || out[0].To != "a" {
		t.Fatalf("released %d messages; want one to a", len(out))
	}
	m := appends(t, out)[0]
	if m.Prev != es[0].Point() || m.Durable != es[0].Point() || !slices.EqualFunc(m.Entries, es[1:4], sameEntry) || m.Reset {
		t.Fatalf("merged %s; want append(1, 1..4, durable 1)", describe(m))
	}
	if out := g.Receive("a", &Promise{Epoch: 1}, t0); out != nil {
		t.Fatalf("a Promise freed the window: %v", out)
	}
	if out := g.Route([]Envelope{{"a", &Append{Epoch: 1, Prev: es[3].Point()}}}, t0); len(out) != 0 {
		t.Fatal("sent an Append while the merged one is in flight")
	}
}

func sameEntry(x, y Entry) bool {
	return x.Seq == y.Seq && x.Before == y.Before && x.After == y.After && string(x.Body) == string(y.Body)
}

// Merging copies: the owner's log, which its Appends share, is never
// written into.
func TestGroupCommitDoesNotWriteTheOwnersLog(t *testing.T) {
	g := NewGroupCommit(0)
	es := entries(Point{}, 3, 1)
	log := slices.Clone(es)
	g.Route([]Envelope{{"a", &Append{Epoch: 1, Entries: log[:1]}}}, t0)
	g.Route([]Envelope{{"a", &Append{Epoch: 1, Prev: es[0].Point(), Entries: log[1:2]}}}, t0)
	g.Route([]Envelope{{"a", &Append{Epoch: 1, Prev: es[1].Point(), Entries: entries(es[1].Point(), 1, 9)}}}, t0)
	if !slices.EqualFunc(log, es, sameEntry) {
		t.Fatal("merging wrote into the log the Appends share")
	}
}

// An Append that does not extend the held one (a retransmission from an
// earlier point, another epoch) replaces it; a reset goes at once and
// drops what was held; what is not an Append goes at once.
func TestGroupCommitReplacesAndResets(t *testing.T) {
	g := NewGroupCommit(0)
	es := entries(Point{}, 4, 1)
	first := &Append{Epoch: 1, Entries: es[:1]}
	g.Route([]Envelope{{"a", first}, {"a", &Append{Epoch: 1, Prev: es[0].Point(), Entries: es[1:2]}}}, t0)
	again := &Append{Epoch: 1, Prev: Point{}, Entries: es[:3]}
	if out := g.Route([]Envelope{{"a", again}}, t0); len(out) != 0 {
		t.Fatalf("a retransmission went past the one in flight: %v", out)
	}
	out := appends(t, g.Receive("a", &Refuse{Epoch: 1, Reason: RefuseGap}, t0))
	if len(out) != 1 || out[0].Prev != (Point{}) || len(out[0].Entries) != 3 {
		t.Fatalf("released %v; want the retransmission of 1..3 alone", out)
	}

	g.Route([]Envelope{{"a", &Append{Epoch: 1, Prev: es[2].Point(), Entries: es[3:4]}}}, t0) // held
	reset := &Append{Epoch: 1, Reset: true, Entries: es}
	fence := &Fence{Epoch: 2}
	out2 := g.Route([]Envelope{{"a", reset}, {"b", fence}}, t0)
	if len(out2) != 2 || out2[0].Msg != reset || out2[1].Msg != fence {
		t.Fatalf("sent %d messages; want the reset and the fence at once", len(out2))
	}
	if out := g.Receive("a", &Ack{Epoch: 1, End: es[3].Point()}, t0); out != nil {
		t.Fatalf("the reset's answer released %v; the reset carried it all", out)
	}
}

// A window whose answer does not come is freed after the retransmit
// interval, and what it held goes, in follower order.
func TestGroupCommitExpires(t *testing.T) {
	const rt = 100 * time.Millisecond
	g := NewGroupCommit(rt)
	es := entries(Point{}, 2, 1)
	for _, id := range []FollowerID{"c", "a", "b"} {
		g.Route([]Envelope{{id, &Append{Epoch: 1, Entries: es[:1]}}, {id, &Append{Epoch: 1, Prev: es[0].Point(), Entries: es[1:]}}}, t0)
	}
	if out := g.Tick(t0.Add(rt - time.Millisecond)); out != nil {
		t.Fatalf("freed before the retransmit interval: %v", out)
	}
	out := g.Tick(t0.Add(rt))
	var to []FollowerID
	for _, e := range out {
		to = append(to, e.To)
	}
	if !slices.Equal(to, abc) {
		t.Fatalf("released to %v; want %v", to, abc)
	}
	// What was released is in flight from then on: the next is held for
	// the interval again.
	g.Route([]Envelope{{"b", &Append{Epoch: 1, Prev: es[1].Point()}}}, t0.Add(rt))
	if out := g.Tick(t0.Add(2*rt - time.Millisecond)); out != nil {
		t.Fatalf("released early: %v", out)
	}
	if out := g.Tick(t0.Add(2 * rt)); len(out) != 1 || out[0].To != "b" {
		t.Fatalf("released %v; want b's Append", out)
	}
	g.Forget("a")
	if out := g.Route([]Envelope{{"a", &Append{Epoch: 1, Prev: es[1].Point()}}}, t0.Add(2*rt)); len(out) != 1 {
		t.Fatal("a forgotten follower's window still holds its Append back")
	}
}
