package follow

import "github.com/framectl/framectl/frames"

// FollowerID names a follower. A follower is its store: a process restarted on
// the same store is the same follower, with everything it acknowledged; a
// store that is lost or wiped comes back, if at all, as a new follower with
// a new ID, brought up to date like any replacement (Owner.Replace). The
// owner counts what a follower acknowledged for as long as the follower is
// in the set, so reusing an ID for an empty store would count commits that
// nobody holds. It is not a node ID (fence.Node.ID, one per process
// registration): the stores' IDs are what own.json's follower set records
// (tails.Store.ID).
type FollowerID string

// NodeID is the old name of FollowerID.
//
// Deprecated: use FollowerID. NodeID is kept for one release.
type NodeID = FollowerID

// Point is a position in an actor's log: just after commit Seq, where the
// chain value is Chain. Seq 0 is the empty log; its chain value is that of
// the empty database (frames.Checksum 0 for a new one).
type Point struct {
	Seq   frames.Seq
	Chain frames.Checksum
}

// Entry is one commit as owner and followers hold it: its sequence number,
// the chain value before and after it, and its body, opaque here (the
// encoded frame of the commit: what the bucket will hold).
//
// The chain value is the actor's rolling database checksum (frames,
// "Rolling checksum"), the value a frame's SQLitePages.Before and After
// carry and the bucket's durable point records: so the bucket's durable
// point and a follower's log can be compared without the bodies. Neither
// side recomputes it from the body (that needs the database); replay in
// package lanes does, and fails on a body that does not produce it.
type Entry struct {
	Seq    frames.Seq
	Before frames.Checksum
	After  frames.Checksum
	Body   []byte
}

// Point returns the position just after the entry.
func (e *Entry) Point() Point { return Point{Seq: e.Seq, Chain: e.After} }

// entryHeaderBytes is an entry's size on the wire besides its body: seq,
// before, after (8 each) and the body's length (4). Part of the wire format.
const entryHeaderBytes = 28

// Size is what the entry counts against a byte bound (Limits.MaxTailBytes):
// its size on the wire.
func (e *Entry) Size() int64 { return entryHeaderBytes + int64(len(e.Body)) }

// chained reports whether es extend p: sequence numbers p.Seq+1, p.Seq+2, ...
// with no gap, each entry's Before equal to the chain value before it.
func chained(p Point, es []Entry) bool {
	for i := range es {
		if es[i].Seq == 0 || es[i].Seq != p.Seq+1 || es[i].Before != p.Chain {
			return false
		}
		p = es[i].Point()
	}
	return true
}

// endOf is the last point of the log base, es (es chained from base).
func endOf(base Point, es []Entry) Point {
	if len(es) == 0 {
		return base
	}
	return es[len(es)-1].Point()
}

// chainAt returns the chain value at seq in the log base, es (es chained
// from base), and whether seq is a point of that log.
func chainAt(base Point, es []Entry, seq frames.Seq) (frames.Checksum, bool) {
	if seq == base.Seq {
		return base.Chain, true
	}
	if seq < base.Seq || seq-base.Seq > frames.Seq(len(es)) {
		return 0, false
	}
	return es[seq-base.Seq-1].After, true
}

// sizeOf is the bytes es count against a byte bound.
func sizeOf(es []Entry) int64 {
	var n int64
	for i := range es {
		n += es[i].Size()
	}
	return n
}

// trimAt is where the log base, es stands once the bucket holds through d:
// the new base and the index of its first entry. A d at or before base
// changes nothing; a d past the end leaves no entry. ok is false when d is
// a point of the log with another chain value: the bucket does not hold
// this log.
func trimAt(base Point, es []Entry, d Point) (Point, int, bool) {
	if d.Seq < base.Seq {
		return base, 0, true
	}
	if d.Seq == base.Seq {
		return base, 0, d.Chain == base.Chain
	}
	end := endOf(base, es)
	if d.Seq > end.Seq {
		return d, len(es), true
	}
	i := int(d.Seq - base.Seq)
	if es[i-1].After != d.Chain {
		return base, 0, false
	}
	return d, i, true
}

// Limits bound what owners and followers hold and what they decode. One
// value for a cluster: a follower whose bound is smaller than its owner's
// refuses frames the owner may legitimately send.
type Limits struct {
	// MaxTailBytes bounds a log past the bucket's durable point, counted
	// as Entry.Size: an owner refuses commits past it (ErrBackpressure)
	// until the bucket catches up, a follower refuses frames past it
	// (RefuseFull). It must hold what accumulates while a bucket batch
	// uploads and the next one fills (batches of 16 MB or 10 s: twice
	// that). Default DefaultMaxTailBytes.
	MaxTailBytes int64
}

// DefaultMaxTailBytes is Limits.MaxTailBytes when zero: four bucket batches
// of 16 MiB.
const DefaultMaxTailBytes = 64 << 20

func (l Limits) tail() int64 {
	if l.MaxTailBytes <= 0 {
		return DefaultMaxTailBytes
	}
	return l.MaxTailBytes
}

// MaxMessageBytes is the largest encoded message: a whole tail (a Promise
// or a reset Append) and the fixed fields around it.
func (l Limits) MaxMessageBytes() int64 { return l.tail() + maxFixedBytes }
