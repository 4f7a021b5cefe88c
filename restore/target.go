package restore

import (
	"fmt"
	"time"

	"github.com/framectl/framectl/frames"
)

// Target says which state of an actor to restore.
//
// Frames are the unit of replay, and a frame in a batch is a merged run of
// commits (the replicator merges every commit made while an upload is in
// flight into one frame holding the newest version of each page). The
// state inside a merged run was never written down, so a restore can stop
// only at a frame boundary:
//
//   - ToSeq(n) restores the state after the last frame ending at or
//     before sequence n: exactly n when a frame ends at n, an earlier
//     boundary otherwise. Result.Seq says which.
//   - AtTime(t) restores the state after the last frame whose commit time is
//     at or before t. A frame carries the commit time of its last commit
//     only, so the restore stops before the first frame whose commit time
//     is after t, even when some of the commits merged into it were made
//     before t. Result.CommitTime says which state was reached.
//   - Latest() restores everything the chosen session holds.
//
// Targets reach back across sessions along the lineage only (lineage.go):
// a target before the oldest state the chosen session holds is looked for
// in the session it continued (its manifests' predecessor), up to the
// sequence number it continued from and never past it, and so on back. A
// target no session of the lineage can reach is an error, a *TargetError
// (ErrTargetOutOfRange) naming the range of the oldest session tried,
// rather than another state restored in its place: a sequence number past
// the newest the chosen session holds, one before the oldest snapshot the
// lineage holds, a time before the oldest state it can place in time. A snapshot that does
// not record when its state was committed (the first snapshot of a new
// actor, at seq 0) is placed in time by the first frame after it only,
// so a time before that frame is out of range too. A time after the newest
// commit is not: it restores the newest state, as it was then.
//
// OrNearest asks for the nearest state instead of the error.
type Target struct {
	kind    targetKind
	seq     frames.Seq
	time    int64 // Unix nanoseconds
	nearest bool
	// capped says that no state past ceiling belongs to the history
	// restored: the session was continued from ceiling by another.
	capped  bool
	ceiling frames.Seq
}

type targetKind uint8

const (
	targetLatest targetKind = iota
	targetSeq
	targetTime
)

// Latest is the newest state of the chosen session. It is the zero Target.
func Latest() Target { return Target{} }

// ToSeq is the state after the last frame ending at or before sequence
// number n.
func ToSeq(n frames.Seq) Target { return Target{kind: targetSeq, seq: n} }

// AtTime is the state after the last frame committed at or before t.
func AtTime(t time.Time) Target { return Target{kind: targetTime, time: t.UnixNano()} }

// OrNearest is t, except that a target outside the range the session can
// restore restores the nearest state in it instead of failing: the newest
// state for a sequence number past the newest, the oldest snapshot for a
// sequence number or a time before the oldest state. Result.OutOfRange
// then says what was asked and what the session holds; Result.Seq and
// CommitTime say what was restored.
func (t Target) OrNearest() Target {
	t.nearest = true
	return t
}

// Nearest reports whether t was made by OrNearest.
func (t Target) Nearest() bool { return t.nearest }

// IsLatest reports whether t is Latest().
func (t Target) IsLatest() bool { return t.kind == targetLatest }

// Frame returns the sequence number of a ToSeq target.
func (t Target) Seq() (frames.Seq, bool) { return t.seq, t.kind == targetSeq }

// Time returns the time of an AtTime target.
func (t Target) Time() (time.Time, bool) { return time.Unix(0, t.time), t.kind == targetTime }

func (t Target) String() string {
	s := "latest"
	switch t.kind {
	case targetSeq:
		s = fmt.Sprintf("seq %d", t.seq)
	case targetTime:
		s = "time " + time.Unix(0, t.time).UTC().Format(time.RFC3339Nano)
	}
	if t.nearest && t.kind != targetLatest {
		s += " or the nearest"
	}
	return s
}

// exact is t without OrNearest, for messages.
func (t Target) exact() Target {
	t.nearest = false
	return t
}

// capTo returns t restricted to states at or before seq, the point a
// successor session continued this one from: a sequence number target
// past it becomes seq itself.
func (t Target) capTo(seq frames.Seq) Target {
	if t.capped && t.ceiling <= seq {
		return t
	}
	t.capped, t.ceiling = true, seq
	if t.kind == targetSeq && t.seq > seq {
		t.seq = seq
	}
	return t
}

// like returns u with t's ceiling: a nearest state chosen in place of t
// is still no state past it.
func (t Target) like(u Target) Target {
	if t.capped {
		return u.capTo(t.ceiling)
	}
	return u
}

// admitsSnapshot reports whether a snapshot at seq, committed at
// commitTime, may be at or before the target.
//
// A snapshot without a commit time (0: a new actor's first snapshot, or a
// session started from a state whose time was not known) is admitted as a
// starting point for a time target, but the replay refuses to stop at it
// (see unknownTime): the state it holds was committed at some time before
// the session's first frame, and only a frame of the session at or before
// the target proves that the target is not earlier than that state.
func (t Target) admitsSnapshot(seq frames.Seq, commitTime int64) bool {
	if t.capped && seq > t.ceiling {
		return false
	}
	switch t.kind {
	case targetSeq:
		return seq <= t.seq
	case targetTime:
		return commitTime <= t.time
	}
	return true
}

// unknownTime reports whether a state with commitTime cannot be placed in
// time. Seq 0, the empty database before any commit, is no exception:
// nothing says when the actor was created, and a time before its first
// commit may be before it existed.
func unknownTime(commitTime int64) bool { return commitTime == 0 }

// admitsFrame reports whether a frame can be applied without passing the
// target. Frames arrive in sequence order, so the first one refused ends
// the restore.
func (t Target) admitsFrame(f *frames.Frame) bool {
	if t.capped && f.LastSeq > t.ceiling {
		return false
	}
	switch t.kind {
	case targetSeq:
		return f.LastSeq <= t.seq
	case targetTime:
		return f.CommitTime <= t.time
	}
	return true
}

// reached reports whether a state at seq already satisfies the target,
// so that nothing more needs to be fetched.
func (t Target) reached(seq frames.Seq) bool {
	return t.kind == targetSeq && seq >= t.seq || t.capped && seq >= t.ceiling
}
