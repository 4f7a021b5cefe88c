package follow

import "github.com/framectl/framectl/frames"

// Message is one protocol message: *Fence, *Promise, *Append, *Ack or
// *Refuse. Its wire encoding is under "Wire format" in the package
// documentation (doc.go).
type Message interface {
	// MsgEpoch is the epoch the message is about: the sender's for Fence
	// and Append, the one answered for Promise, Ack and Refuse.
	MsgEpoch() frames.Epoch
}

// Fence is a new owner's first message to every follower of the set:
// refuse every epoch older than Epoch from now on, and answer with what you
// hold (a Promise).
type Fence struct {
	Epoch frames.Epoch
	// Actor names the actor where the bucket keeps it ("<namespace>/<actor
	// ID>", as frames.Actor spells it; MaxBucketActorBytes at most), so
	// that a follower can check that an owner of Epoch exists before it
	// promises to refuse every older one (package quorum reads own.json:
	// a fence for epoch 2^64-1 from anyone holding the cluster key must
	// not brick the actor). The protocol itself never reads it.
	Actor string
}

// Promise answers a Fence: the follower will refuse every epoch older than
// Epoch, and holds the log LogEpoch's owner wrote, Entries chained from Base.
// LogEpoch 0: it holds nothing past Base from anyone.
type Promise struct {
	Epoch    frames.Epoch
	LogEpoch frames.Epoch
	Base     Point
	Entries  []Entry
}

// Append carries entries of the owner of Epoch, chained from Prev, and the
// bucket's durable point as the owner knows it (Durable), below which the
// follower drops what it holds. With Reset set, Prev is the owner's durable
// point and Entries everything the owner holds past it: a follower that
// holds another epoch's log, or too little of this one, replaces its log
// with it. Without Reset, a follower that does not hold the owner's log
// refuses (RefuseNeedReset); one that does but ends before Prev refuses with
// its end (RefuseGap).
type Append struct {
	Epoch   frames.Epoch
	Reset   bool
	Prev    Point
	Durable Point
	Entries []Entry
	// Actor is Fence's: an owner sets it on resets, the only Appends that
	// raise a follower's promise (a follower added after the takeover
	// gets no Fence), and leaves it empty on the others.
	Actor string
}

// Ack says that the follower holds, on its disk, the log of Epoch's owner
// through End.
type Ack struct {
	Epoch frames.Epoch
	End   Point
}

// Refuse says why a follower did not take a message about Epoch. Newest is
// the newest epoch it was told of; End the end of what it holds.
type Refuse struct {
	Epoch  frames.Epoch
	Reason Reason
	Newest frames.Epoch
	End    Point
}

// Reason is why a follower refused a message. Part of the wire format.
type Reason uint8

const (
	// RefuseStale: the follower was told of a newer epoch (Newest): the
	// sender is superseded.
	RefuseStale Reason = 1
	// RefuseNeedReset: the follower holds no log of the sender's epoch;
	// send a Reset.
	RefuseNeedReset Reason = 2
	// RefuseGap: the follower's log of this epoch ends at End, before the
	// message's Prev; send from End.
	RefuseGap Reason = 3
	// RefuseFull: taking the entries would hold more than
	// Limits.MaxTailBytes. The owner stops sending to the follower: it is
	// failed, to be replaced.
	RefuseFull Reason = 4
	// RefuseBroken: the message contradicts itself or what the follower
	// holds of the same epoch (entries not chained, a durable point it holds
	// with another chain value, epoch 0). Never sent to a correct owner;
	// the owner treats the follower as failed.
	RefuseBroken Reason = 5
	// RefuseUnproven: the message would raise the follower's promise to
	// its epoch, and the bucket does not show an owner of that epoch
	// (own.json at an older one, missing, or a Fence naming no actor or
	// another actor than the one it came for). Never sent to a correct
	// owner, whose claim precedes its first message; the owner treats the
	// follower as failed.
	RefuseUnproven Reason = 6
)

// MaxBucketActorBytes bounds Fence.Actor and Append.Actor: a frames.Actor
// takes 279 bytes at most (a namespace of 22, a slash, an ID of 256 hex
// digits).
const MaxBucketActorBytes = 512

func (r Reason) String() string {
	switch r {
	case RefuseStale:
		return "stale"
	case RefuseNeedReset:
		return "need reset"
	case RefuseGap:
		return "gap"
	case RefuseFull:
		return "full"
	case RefuseBroken:
		return "broken"
	case RefuseUnproven:
		return "unproven"
	}
	return "unknown reason"
}

func (m *Fence) MsgEpoch() frames.Epoch   { return m.Epoch }
func (m *Promise) MsgEpoch() frames.Epoch { return m.Epoch }
func (m *Append) MsgEpoch() frames.Epoch  { return m.Epoch }
func (m *Ack) MsgEpoch() frames.Epoch     { return m.Epoch }
func (m *Refuse) MsgEpoch() frames.Epoch  { return m.Epoch }

// Envelope is a message to send, and to whom.
type Envelope struct {
	To  FollowerID
	Msg Message
}
