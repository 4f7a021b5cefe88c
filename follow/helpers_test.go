package follow

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/framectl/framectl/frames"
)

var t0 = time.Unix(1_700_000_000, 0)

// entries returns n entries chained from p, their bodies naming their seq
// and tag, so that two branches from one point differ.
func entries(p Point, n int, tag byte) []Entry {
	var es []Entry
	for range n {
		body := binary.BigEndian.AppendUint64([]byte{tag}, uint64(p.Seq+1))
		x := uint64(p.Chain) + uint64(p.Seq+1)*0x9e3779b97f4a7c15 + uint64(tag)
		x = (x ^ x>>31) * 0xbf58476d1ce4e5b9
		e := Entry{Seq: p.Seq + 1, Before: p.Chain, After: frames.Checksum(x ^ x>>29), Body: body}
		es = append(es, e)
		p = e.Point()
	}
	return es
}

// cluster wires an owner (or takeover) to followers in memory, delivering
// every message in order unless a test intervenes.
type cluster struct {
	t         *testing.T
	followers map[FollowerID]*Follower
	down      map[FollowerID]bool
}

func newCluster(t *testing.T, ids ...FollowerID) *cluster {
	c := &cluster{t: t, followers: map[FollowerID]*Follower{}, down: map[FollowerID]bool{}}
	for _, id := range ids {
		c.followers[id] = NewFollower(Limits{})
	}
	return c
}

type node interface {
	Outbox() []Envelope
	Receive(FollowerID, Message)
}

// run delivers messages between n and the followers until none is left.
func (c *cluster) run(n node) {
	for range 1000 {
		out := n.Outbox()
		if len(out) == 0 {
			return
		}
		for _, env := range out {
			f := c.followers[env.To]
			if f == nil || c.down[env.To] {
				continue
			}
			if reply := f.Handle(env.Msg); reply != nil {
				n.Receive(env.To, reply)
			}
		}
	}
	c.t.Fatal("messages never stopped")
}

// takeover runs a takeover of epoch over the followers and returns the new
// owner.
func (c *cluster) takeover(epoch frames.Epoch, q int, set []FollowerID, bucket Point) *Owner {
	c.t.Helper()
	tk, err := NewTakeover(TakeoverConfig{Epoch: epoch, Quorum: q, Followers: set, Bucket: bucket}, t0)
	if err != nil {
		c.t.Fatal(err)
	}
	c.run(tk)
	r, err, done := tk.Done()
	if !done || err != nil {
		c.t.Fatalf("takeover of epoch %d: done %v, %v", epoch, done, err)
	}
	o, err := NewOwner(r, OwnerConfig{}, t0)
	if err != nil {
		c.t.Fatal(err)
	}
	c.run(o)
	return o
}

func (c *cluster) appendAll(o *Owner, es []Entry) {
	c.t.Helper()
	for _, e := range es {
		if err := o.Append(e); err != nil {
			c.t.Fatalf("Append(%d): %v", e.Seq, err)
		}
	}
	c.run(o)
}

// describe is a message in a line of a trace or a failure.
func describe(m Message) string {
	switch m := m.(type) {
	case nil:
		return "-"
	case *Fence:
		return fmt.Sprintf("fence(%d)", m.Epoch)
	case *Promise:
		return fmt.Sprintf("promise(%d, log %d, %d..%d)", m.Epoch, m.LogEpoch, m.Base.Seq, endOf(m.Base, m.Entries).Seq)
	case *Append:
		r := ""
		if m.Reset {
			r = " reset"
		}
		return fmt.Sprintf("append(%d%s, %d..%d, durable %d)", m.Epoch, r, m.Prev.Seq, endOf(m.Prev, m.Entries).Seq, m.Durable.Seq)
	case *Ack:
		return fmt.Sprintf("ack(%d, %d)", m.Epoch, m.End.Seq)
	case *Refuse:
		return fmt.Sprintf("refuse(%d, %s, newest %d, end %d)", m.Epoch, m.Reason, m.Newest, m.End.Seq)
	}
	return fmt.Sprintf("%T", m)
}
