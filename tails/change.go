package tails

import (
	"fmt"

	"github.com/framectl/framectl/follow"
)

// change is the record that takes a file holding prev (prevBytes of
// entries) to holding st, and the bytes of st's entries: nil when st is
// prev; an Append (a delta) when st is prev cut at its start and extended
// at its end within one log epoch, which is every change a follower makes
// but a reset from a new epoch; otherwise a Promise holding st whole.
//
// A delta costs what it adds, not the whole tail: the entries st shares
// with prev are compared, not written, and when st's entries are a slice
// of prev's array (a follower's next state) not even looked at. It checks
// st as follow.OpenFollower would, and that st takes back no promise
// (ErrInvalid otherwise): a file never holds a state that reads back as
// an error.
func change(prev *follow.State, prevBytes int64, st *follow.State, lim follow.Limits) (follow.Message, int64, error) {
	invalid := func(format string, args ...any) (follow.Message, int64, error) {
		return nil, 0, fmt.Errorf("%w: state: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case st.Promised == 0 && (st.LogEpoch != 0 || st.Base != (follow.Point{}) || len(st.Entries) > 0):
		return invalid("promised epoch 0 but it holds a log")
	case st.LogEpoch > st.Promised:
		return invalid("log epoch %d past promised epoch %d", st.LogEpoch, st.Promised)
	case st.Promised < prev.Promised:
		return invalid("promised epoch %d, lower than the %d stored", st.Promised, prev.Promised)
	case st.LogEpoch < prev.LogEpoch:
		return invalid("log epoch %d, lower than the %d stored", st.LogEpoch, prev.LogEpoch)
	case st.Promised == 0:
		return nil, 0, nil // the zero state, and prev is too
	}
	if a, bytes, ok := delta(prev, prevBytes, st); ok {
		if !chained(a.Prev, a.Entries) {
			return invalid("entries not chained from seq %d", a.Prev.Seq)
		}
		if bytes > lim.MaxTailBytes {
			return invalid("%d bytes past the bound of %d", bytes, lim.MaxTailBytes)
		}
		if a.Epoch == prev.Promised && a.Durable == prev.Base && len(a.Entries) == 0 {
			return nil, bytes, nil
		}
		return a, bytes, nil
	}
	bytes := sizeOf(st.Entries)
	switch {
	case !chained(st.Base, st.Entries):
		return invalid("entries not chained from seq %d", st.Base.Seq)
	case bytes > lim.MaxTailBytes:
		return invalid("%d bytes past the bound of %d", bytes, lim.MaxTailBytes)
	}
	return wholeState(st), bytes, nil
}

// delta is the Append record taking prev to st, if there is one: the new
// base as its durable point, the entries past prev's end, chained from
// prev's end (or from the new base, when that is past prev's end), and
// the bytes of st's entries. The entries are checked by the caller.
func delta(prev *follow.State, prevBytes int64, st *follow.State) (*follow.Append, int64, bool) {
	if prev.Promised == 0 || st.LogEpoch != prev.LogEpoch || st.Base.Seq < prev.Base.Seq {
		return nil, 0, false
	}
	end := prev.End()
	if st.Base.Seq > end.Seq {
		// Everything prev held is in the bucket.
		return &follow.Append{Epoch: st.Promised, Prev: st.Base, Durable: st.Base, Entries: st.Entries}, sizeOf(st.Entries), true
	}
	if c, _ := chainAt(prev.Base, prev.Entries, st.Base.Seq); c != st.Base.Chain {
		return nil, 0, false
	}
	cut := int(st.Base.Seq - prev.Base.Seq) // entries of prev that st drops
	keep := len(prev.Entries) - cut         // entries of prev that st holds
	if len(st.Entries) < keep || !sameEntries(prev.Entries[cut:], st.Entries[:keep]) {
		return nil, 0, false
	}
	add := st.Entries[keep:]
	bytes := prevBytes - sizeOf(prev.Entries[:cut]) + sizeOf(add)
	return &follow.Append{Epoch: st.Promised, Prev: end, Durable: st.Base, Entries: add}, bytes, true
}
