package tails

import (
	"github.com/framectl/framectl/follow"
)

// Handle is the follower of actor taking m: the follower is opened from
// the stored state (and kept in memory with it), handles m, and its new
// state is saved before Handle returns the reply, so a reply is never
// sent for a state that is not on disk. The reply is nil for a message a
// follower does not take.
//
// When the state cannot be made durable (the store's bound or the disk
// is full, or another failure to write), the reply is a refusal as full
// (follow.RefuseFull) reporting the state the disk holds, returned with
// the error: the owner stops sending to this follower, to be replaced.
// The follower goes back to that state. When the actor's file cannot be
// read (it fails its checks, or the actor is failed: ErrFailed), Handle
// returns no reply and the error: the store cannot speak for what the
// actor's follower acknowledged.
func (s *Store) Handle(actor string, m follow.Message) (follow.Message, error) {
	a, err := s.acquire(actor)
	if err != nil {
		return nil, err
	}
	defer s.release(a)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := s.load(a); err != nil {
		return nil, err
	}
	if a.fl == nil {
		if a.fl, err = follow.OpenFollower(a.st, s.cfg.Limits); err != nil {
			return nil, err // load checked this: a bug
		}
	}
	durable := a.st
	reply := a.fl.Handle(m)
	if err := s.save(a, a.fl.State()); err != nil {
		a.fl = nil
		return &follow.Refuse{Epoch: m.MsgEpoch(), Reason: follow.RefuseFull, Newest: durable.Promised, End: durable.End()}, err
	}
	return reply, nil
}
