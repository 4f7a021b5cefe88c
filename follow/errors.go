package follow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/framectl/framectl/frames"
)

// Errors callers decide on, for errors.Is. The typed errors below say more.
var (
	// ErrSuperseded: a newer epoch fenced this one at a follower. The
	// owner (or takeover) of the older epoch must stop: nothing it does
	// from now on is acknowledged.
	ErrSuperseded = errors.New("follow: superseded by a newer epoch")
	// ErrTooFewAnswers: a takeover did not hear from n-q+1 followers of
	// the set within its wait. It never picks a tail from fewer: one might
	// miss an acknowledged commit. Retry, or replace followers by hand.
	ErrTooFewAnswers = errors.New("follow: too few followers answered the fence")
	// ErrDiverged: what followers hold contradicts itself or the bucket in a
	// way no correct run produces (two logs of one epoch that disagree, a
	// log that starts past the bucket's durable point, an answer of the
	// takeover's own epoch). The takeover stops rather than guess.
	ErrDiverged = errors.New("follow: follower logs contradict each other or the bucket")
	// ErrBackpressure: the owner holds Limits.MaxTailBytes past the
	// bucket's durable point; the commit must wait for the bucket.
	ErrBackpressure = errors.New("follow: tail full, waiting for the bucket")
	// ErrInvalid: a caller broke a rule of the API (an entry that does not
	// extend the log, a durable point the owner never held, a bad quorum).
	ErrInvalid = errors.New("follow: invalid")
	// ErrFollowerFull and ErrFollowerBroken are why an owner stopped
	// sending to a follower (FollowerStatus.Failed).
	ErrFollowerFull   = errors.New("follow: follower full")
	ErrFollowerBroken = errors.New("follow: follower answered what was never sent")
)

// SupersededError is ErrSuperseded with the epochs.
type SupersededError struct {
	Epoch frames.Epoch // the superseded one
	Newer frames.Epoch // the newest a follower was told of
	By    FollowerID   // the follower that said so
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("follow: epoch %d superseded: follower %s was told of epoch %d", e.Epoch, e.By, e.Newer)
}
func (e *SupersededError) Is(target error) bool { return target == ErrSuperseded }

// TooFewAnswersError is ErrTooFewAnswers with who answered.
type TooFewAnswersError struct {
	Epoch    frames.Epoch
	Need     int          // n-q+1
	Answered []FollowerID // sorted
	Broken   []FollowerID // answered with a log that is not chained; not counted
	// Unproven refused the fence: they found no claim of Epoch in the
	// bucket (RefuseUnproven).
	Unproven []FollowerID
	Waited   time.Duration
}

func (e *TooFewAnswersError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "follow: takeover of epoch %d: %d of the %d answers it needs after %v (answered: %s)",
		e.Epoch, len(e.Answered), e.Need, e.Waited, joinIDs(e.Answered))
	if len(e.Broken) > 0 {
		fmt.Fprintf(&b, "; answers not chained, not counted: %s", joinIDs(e.Broken))
	}
	if len(e.Unproven) > 0 {
		fmt.Fprintf(&b, "; refused, finding no claim of epoch %d in the bucket: %s", e.Epoch, joinIDs(e.Unproven))
	}
	return b.String()
}
func (e *TooFewAnswersError) Is(target error) bool { return target == ErrTooFewAnswers }

// DivergedError is ErrDiverged with the follower and the point concerned.
type DivergedError struct {
	Epoch    frames.Epoch
	Follower FollowerID
	Other    FollowerID // the follower it disagrees with, "" for the bucket
	Seq      frames.Seq
	Why      string
}

func (e *DivergedError) Error() string {
	other := "the bucket"
	if e.Other != "" {
		other = "follower " + string(e.Other)
	}
	return fmt.Sprintf("follow: takeover of epoch %d: follower %s and %s at seq %d: %s", e.Epoch, e.Follower, other, e.Seq, e.Why)
}
func (e *DivergedError) Is(target error) bool { return target == ErrDiverged }

func joinIDs(ids []FollowerID) string {
	if len(ids) == 0 {
		return "none"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
