package tails

import (
	"bytes"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// The rules of a log (a point and entries chained from it) that package
// follow keeps unexported.

func endOf(base follow.Point, es []follow.Entry) follow.Point {
	if len(es) == 0 {
		return base
	}
	return es[len(es)-1].Point()
}

// chainAt is the chain value at seq in the log base, es, and whether seq
// is a point of it.
func chainAt(base follow.Point, es []follow.Entry, seq frames.Seq) (frames.Checksum, bool) {
	if seq == base.Seq {
		return base.Chain, true
	}
	if seq < base.Seq || seq-base.Seq > frames.Seq(len(es)) {
		return 0, false
	}
	return es[seq-base.Seq-1].After, true
}

func chained(p follow.Point, es []follow.Entry) bool {
	for i := range es {
		if es[i].Seq == 0 || es[i].Seq != p.Seq+1 || es[i].Before != p.Chain {
			return false
		}
		p = es[i].Point()
	}
	return true
}

func sizeOf(es []follow.Entry) int64 {
	var n int64
	for i := range es {
		n += es[i].Size()
	}
	return n
}

// sameEntries reports whether a and b hold the same entries, bodies
// included. Slices of one array (what a follower hands out from one
// message to the next) are the same without a look at each entry.
func sameEntries(a, b []follow.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Seq != y.Seq || x.Before != y.Before || x.After != y.After || !bytes.Equal(x.Body, y.Body) {
			return false
		}
	}
	return true
}
