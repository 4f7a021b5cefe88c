package follow

import (
	"errors"
	"testing"

	"github.com/framectl/framectl/frames"
)

func mustAck(t *testing.T, reply Message, epoch frames.Epoch, end Point) {
	t.Helper()
	a, ok := reply.(*Ack)
	if !ok || a.Epoch != epoch || a.End != end {
		t.Fatalf("reply %s, want ack(%d, %d)", describe(reply), epoch, end.Seq)
	}
}

func mustRefuse(t *testing.T, reply Message, r Reason) *Refuse {
	t.Helper()
	rf, ok := reply.(*Refuse)
	if !ok || rf.Reason != r {
		t.Fatalf("reply %s, want a %s refusal", describe(reply), r)
	}
	return rf
}

// A fenced follower refuses the older epoch, Fence and Append alike, and
// says which epoch is newer.
func TestFollowerRefusesOlderEpochs(t *testing.T) {
	f := NewFollower(Limits{})
	es := entries(Point{}, 3, 1)
	mustAck(t, f.Handle(&Append{Epoch: 3, Reset: true, Entries: es}), 3, es[2].Point())
	if _, ok := f.Handle(&Fence{Epoch: 5}).(*Promise); !ok {
		t.Fatal("fence of a newer epoch not answered with a promise")
	}
	more := entries(es[2].Point(), 1, 1)
	for _, m := range []Message{&Append{Epoch: 3, Prev: es[2].Point(), Entries: more}, &Fence{Epoch: 4}, &Append{Epoch: 4, Reset: true}} {
		if rf := mustRefuse(t, f.Handle(m), RefuseStale); rf.Newest != 5 {
			t.Fatalf("stale refusal names epoch %d, want 5", rf.Newest)
		}
	}
	if st := f.State(); st.End() != es[2].Point() || st.LogEpoch != 3 || st.Promised != 5 {
		t.Fatalf("state after refusals: %+v", st)
	}
}

// Entries that are not one chain from their point are refused, and change
// nothing, not even the promise.
func TestFollowerRefusesUnchained(t *testing.T) {
	f := NewFollower(Limits{})
	es := entries(Point{}, 3, 1)
	es[1].Before ^= 1
	mustRefuse(t, f.Handle(&Append{Epoch: 2, Reset: true, Entries: es}), RefuseBroken)
	gap := entries(Point{}, 3, 1)
	mustRefuse(t, f.Handle(&Append{Epoch: 2, Reset: true, Entries: []Entry{gap[0], gap[2]}}), RefuseBroken)
	if st := f.State(); st.Promised != 0 || len(st.Entries) != 0 {
		t.Fatalf("a refused message changed the state: %+v", st)
	}
}

// A new epoch's first Append must be a reset. One that is not changes
// nothing, the promise included (only a Fence or a reset raises it, so that
// package quorum checks those two against the bucket): the old epoch goes
// on until the reset, after which it is refused.
func TestFollowerNeedsReset(t *testing.T) {
	f := NewFollower(Limits{})
	old := entries(Point{}, 4, 1)
	mustAck(t, f.Handle(&Append{Epoch: 1, Reset: true, Entries: old}), 1, old[3].Point())
	mine := entries(old[1].Point(), 1, 2)
	mustRefuse(t, f.Handle(&Append{Epoch: 2, Prev: old[1].Point(), Entries: mine}), RefuseNeedReset)
	if st := f.State(); st.Promised != 1 {
		t.Fatalf("an Append of epoch 2 without a reset raised the promise to %d", st.Promised)
	}
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: old[3].Point()}), 1, old[3].Point())
	// The reset replaces the old epoch's log, including what it held past
	// the new owner's log.
	tail := append(old[:2:2], mine...)
	mustAck(t, f.Handle(&Append{Epoch: 2, Reset: true, Entries: tail}), 2, mine[0].Point())
	mustRefuse(t, f.Handle(&Append{Epoch: 1, Prev: old[3].Point()}), RefuseStale)
	if st := f.State(); st.LogEpoch != 2 || len(st.Entries) != 3 || st.End() != mine[0].Point() {
		t.Fatalf("state after the reset: %+v", st)
	}
}

// Within one epoch nothing takes back what was acknowledged: a duplicate,
// a late retransmission, a late reset.
func TestFollowerNeverShrinksWithinEpoch(t *testing.T) {
	f := NewFollower(Limits{})
	es := entries(Point{}, 6, 1)
	mustAck(t, f.Handle(&Append{Epoch: 1, Reset: true, Entries: es[:2]}), 1, es[1].Point())
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: es[1].Point(), Entries: es[2:6]}), 1, es[5].Point())
	mustAck(t, f.Handle(&Append{Epoch: 1, Reset: true, Entries: es[:2]}), 1, es[5].Point())
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: es[1].Point(), Entries: es[2:4]}), 1, es[5].Point())
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: es[2].Point(), Entries: es[3:6]}), 1, es[5].Point())
	if got := len(f.State().Entries); got != 6 {
		t.Fatalf("holds %d entries, want 6", got)
	}
	// Overlap that disagrees within one epoch is a broken sender.
	other := entries(es[3].Point(), 2, 9)
	mustRefuse(t, f.Handle(&Append{Epoch: 1, Prev: es[3].Point(), Entries: other}), RefuseBroken)
}

// An Append past the end is refused with the end to send from; one that
// overlaps the end takes what is new.
func TestFollowerGap(t *testing.T) {
	f := NewFollower(Limits{})
	es := entries(Point{}, 6, 1)
	mustAck(t, f.Handle(&Append{Epoch: 1, Reset: true, Entries: es[:2]}), 1, es[1].Point())
	if rf := mustRefuse(t, f.Handle(&Append{Epoch: 1, Prev: es[3].Point(), Entries: es[4:]}), RefuseGap); rf.End != es[1].Point() {
		t.Fatalf("gap refusal says end %d, want %d", rf.End.Seq, es[1].Seq)
	}
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: es[0].Point(), Entries: es[1:]}), 1, es[5].Point())
}

// The owner's durable point trims what the bucket holds, before the bound
// is checked: a follower full of what the bucket now holds takes more.
func TestFollowerTrimsAndBounds(t *testing.T) {
	es := entries(Point{}, 10, 1)
	bound := sizeOf(es[:4])
	f := NewFollower(Limits{MaxTailBytes: bound})
	mustAck(t, f.Handle(&Append{Epoch: 1, Reset: true, Entries: es[:4]}), 1, es[3].Point())
	mustRefuse(t, f.Handle(&Append{Epoch: 1, Prev: es[3].Point(), Entries: es[4:5]}), RefuseFull)
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: es[3].Point(), Entries: es[4:8], Durable: es[3].Point()}), 1, es[7].Point())
	if st := f.State(); st.Base != es[3].Point() || len(st.Entries) != 4 || f.Bytes() != sizeOf(es[4:8]) {
		t.Fatalf("after the trim: base %d, %d entries, %d bytes", st.Base.Seq, len(st.Entries), f.Bytes())
	}
	// A durable point past the end leaves nothing, and the log continues
	// from it.
	mustAck(t, f.Handle(&Append{Epoch: 1, Prev: es[7].Point(), Durable: es[9].Point()}), 1, es[9].Point())
	// A durable point held with another chain value is refused.
	f2 := NewFollower(Limits{})
	mustAck(t, f2.Handle(&Append{Epoch: 1, Reset: true, Entries: es[:4]}), 1, es[3].Point())
	bad := es[1].Point()
	bad.Chain ^= 1
	mustRefuse(t, f2.Handle(&Append{Epoch: 1, Prev: es[3].Point(), Durable: bad}), RefuseBroken)
}

func TestOpenFollowerChecksState(t *testing.T) {
	es := entries(Point{}, 3, 1)
	if _, err := OpenFollower(State{Promised: 2, LogEpoch: 2, Entries: es}, Limits{}); err != nil {
		t.Fatal(err)
	}
	broken := append([]Entry(nil), es...)
	broken[2].Before ^= 1
	for name, st := range map[string]State{
		"unchained":           {Promised: 2, LogEpoch: 2, Entries: broken},
		"log past promise":    {Promised: 1, LogEpoch: 2, Entries: es},
		"more than the bound": {Promised: 2, LogEpoch: 2, Entries: es},
	} {
		lim := Limits{}
		if name == "more than the bound" {
			lim.MaxTailBytes = sizeOf(es) - 1
		}
		if _, err := OpenFollower(st, lim); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: OpenFollower: %v, want ErrInvalid", name, err)
		}
	}
}
