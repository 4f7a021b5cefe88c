package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// ErrClosed: the session ended (Session.Close) or its hub closed.
var ErrClosed = errors.New("quorum: session closed")

// Session is the owner's side of one actor's followers for one session of
// it on this node at a time: a session.Peers. Make one per actor opened
// (Hub.Session); framectl.DB.Reopen uses it again for the next session.
type Session struct {
	h     *Hub
	actor string
	// inBucket is the actor as the bucket names it (frames.Actor.String),
	// on every Fence and reset: the followers check the claim by it.
	inBucket string

	mu      sync.Mutex
	tk      *follow.Takeover
	tkDone  chan struct{} // closed when tk is done
	owner   *follow.Owner
	n, q    int
	changed chan struct{} // closed and replaced when Acked or Err may have changed
	err     error         // superseded
	closed  bool
	gc      *follow.GroupCommit // one Append in flight per follower: the owner's messages go through it
	own     fence.Ownership     // the claim as own.json holds it now (replace.go rewrites it)
	repl    replacing           // changes of the set (replace.go)
	// unreachable: the followers no live node served at the last look
	// (replace.go), which Acked does not count on.
	unreachable map[follow.FollowerID]bool
}

// Session returns a new session for actor a on this node.
func (h *Hub) Session(a frames.Actor) *Session {
	return &Session{h: h, actor: ActorName(a), inBucket: a.String(), changed: make(chan struct{}), repl: replacing{avoid: map[follow.FollowerID]time.Time{}}}
}

// Takeover fences the followers prev records, for epoch, and returns the
// tail past b they hold (session.Peers). No followers: nothing.
func (s *Session) Takeover(ctx context.Context, prev fence.Record, epoch frames.Epoch, b follow.Point) ([]follow.Entry, error) {
	// Open calls Takeover first: a session of framectl.DB.Reopen starts here
	// with what the closed one left.
	s.mu.Lock()
	s.closed, s.owner, s.err, s.tk, s.tkDone, s.n, s.q, s.own = false, nil, nil, nil, nil, 0, 0, fence.Ownership{}
	s.unreachable, s.repl = nil, replacing{avoid: map[follow.FollowerID]time.Time{}}
	s.gc = follow.NewGroupCommit(s.h.cfg.Retransmit)
	s.mu.Unlock()
	if len(prev.Followers) == 0 {
		return nil, nil
	}
	set := nodeIDs(prev.Followers)
	for _, id := range set {
		if id == s.h.cfg.Self {
			continue
		}
		if err := s.h.cfg.Directory.Locate(ctx, id); err != nil {
			// Unreachable is not fatal: follow waits for n-q+1 of them.
			s.h.log.Info("takeover: follower not located", logattr.Actor, s.actor, logattr.Follower, id, logattr.Err, err)
		}
	}
	tk, err := follow.NewTakeover(follow.TakeoverConfig{Epoch: epoch, Quorum: prev.Quorum, Followers: set, Bucket: b,
		Wait: s.h.cfg.TakeoverWait, Retransmit: s.h.cfg.Retransmit, Actor: s.inBucket}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("quorum: takeover of %s: %w", s.actor, err)
	}
	s.mu.Lock()
	s.tk, s.tkDone = tk, make(chan struct{})
	done := s.tkDone
	out := tk.Outbox()
	s.mu.Unlock()
	if err := s.h.register(s); err != nil {
		return nil, err
	}
	s.h.stats.takeovers.Add(1)
	s.h.sendAll(s.actor, out)
	select {
	case <-done:
	case <-ctx.Done():
		s.h.unregister(s)
		return nil, fmt.Errorf("quorum: takeover of %s: %w", s.actor, ctx.Err())
	}
	s.mu.Lock()
	r, err, _ := tk.Done()
	s.tk = nil
	s.mu.Unlock()
	if err != nil {
		s.h.unregister(s)
		return nil, fmt.Errorf("quorum: takeover of %s: %w", s.actor, err)
	}
	if len(r.Tail) > 0 {
		s.h.stats.tailsRecovered.Add(1)
		s.h.log.Info("takeover recovered a tail", logattr.Actor, s.actor, "from", r.From, "entries", len(r.Tail),
			"first", r.Tail[0].Seq, "last", r.Tail[len(r.Tail)-1].Seq)
	}
	return r.Tail, nil
}

// Start chooses the session's followers, records them in own.json, and
// starts the owner at at (session.Peers).
func (s *Session) Start(ctx context.Context, own fence.Ownership, at follow.Point) (fence.Ownership, error) {
	cands, err := s.h.cfg.Directory.Candidates(ctx)
	if err != nil {
		return own, fmt.Errorf("quorum: choosing followers of %s: %w", s.actor, err)
	}
	set := s.choose(ctx, cands, s.h.cfg.Followers, func(follow.FollowerID) bool { return false })
	q := 0
	if len(set) > 0 {
		q = len(set)/2 + 1
		if s.h.cfg.Quorum > 0 {
			q = min(s.h.cfg.Quorum, len(set))
		}
	}
	// Recorded before anything is sent: a takeover must find every
	// follower that may acknowledge.
	if own, err = s.h.cfg.Directory.Record(ctx, own, set, q); err != nil {
		return own, fmt.Errorf("quorum: recording the followers of %s: %w", s.actor, err)
	}
	if len(set) == 0 {
		s.h.unregister(s)
		return own, nil
	}
	o, err := follow.NewOwner(follow.Recovery{Epoch: own.Epoch, Quorum: q, Followers: set, Base: at},
		follow.OwnerConfig{Limits: s.h.cfg.Limits, Retransmit: s.h.cfg.Retransmit, Actor: s.inBucket}, time.Now())
	if err != nil {
		return own, fmt.Errorf("quorum: starting the owner of %s: %w", s.actor, err)
	}
	s.mu.Lock()
	s.owner, s.n, s.q, s.own = o, len(set), q, own
	if s.gc == nil {
		s.gc = follow.NewGroupCommit(s.h.cfg.Retransmit)
	}
	out := s.gc.Route(o.Outbox(), time.Now())
	s.mu.Unlock()
	if err := s.h.register(s); err != nil {
		return own, err
	}
	s.h.sendAll(s.actor, out)
	return own, nil
}

// Append hands the next commit to the followers (session.Peers).
func (s *Session) Append(e follow.Entry) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.owner == nil {
		s.mu.Unlock()
		return nil // no followers: the bucket acknowledges
	}
	err := s.owner.Append(e)
	out := s.gc.Route(s.owner.Outbox(), time.Now())
	s.noteLocked()
	s.mu.Unlock()
	s.h.sendAll(s.actor, out)
	return err
}

// BucketDurable tells the followers the bucket holds through p (session.Peers).
func (s *Session) BucketDurable(p follow.Point) {
	s.mu.Lock()
	if s.owner == nil || s.closed {
		s.mu.Unlock()
		return
	}
	if err := s.owner.BucketDurable(p); err != nil && !errors.Is(err, follow.ErrSuperseded) {
		s.h.log.Error("bucket durable point not in the owner's log", logattr.Actor, s.actor, logattr.Seq, p.Seq, logattr.Err, err)
	}
	out := s.gc.Route(s.owner.Outbox(), time.Now())
	s.noteLocked()
	s.mu.Unlock()
	s.h.sendAll(s.actor, out)
}

// Acked returns what q followers hold, whether q of them can acknowledge
// now, and the channel closed when either may change (session.Peers).
func (s *Session) Acked() (frames.Seq, <-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == nil || s.closed || s.err != nil {
		return 0, s.changed, false
	}
	live := 0
	for _, f := range s.owner.Followers() {
		if f.Member && f.Failed == nil && !s.unreachable[f.ID] {
			live++
		}
	}
	return s.owner.Acked(), s.changed, live >= s.q
}

// Err is non-nil once a newer epoch fenced this one (session.Peers).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and returns own as the session leaves it: with
// the version of own.json a replacement of followers wrote, if one did
// (session.Peers).
func (s *Session) Close(own fence.Ownership) fence.Ownership {
	s.mu.Lock()
	wasClosed := s.closed
	if !s.closed {
		s.closed = true
		s.noteChangedLocked()
	}
	s.mu.Unlock()
	// A write of own.json under way lands first: the ownership returned
	// must be the version own.json holds.
	s.awaitRecording()
	if !wasClosed {
		s.h.unregister(s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != nil && s.own.Epoch == own.Epoch {
		own = s.own
	}
	return own
}

// Stats is what the session's owner knows of its followers.
func (s *Session) Stats() SessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SessionStats{Quorum: s.q}
	if s.owner == nil {
		return st
	}
	st.Acked, st.Head = s.owner.Acked(), s.owner.Head().Seq
	st.Followers = s.owner.Followers()
	return st
}

// SessionStats describes a session's followers.
type SessionStats struct {
	Quorum    int
	Acked     frames.Seq // held by q followers, or the bucket
	Head      frames.Seq // the last commit appended
	Followers []follow.FollowerStatus
}

func (s *Session) receive(from follow.FollowerID, m follow.Message) {
	s.mu.Lock()
	var out []follow.Envelope
	switch {
	case s.tk != nil:
		s.tk.Receive(from, m)
		out = s.tk.Outbox()
		s.takeoverDoneLocked()
	case s.owner != nil && !s.closed:
		now := time.Now()
		out = s.gc.Receive(from, m, now) // what was held goes first
		s.owner.Receive(from, m)
		out = append(out, s.gc.Route(s.owner.Outbox(), now)...)
		s.noteLocked()
	}
	s.mu.Unlock()
	s.h.sendAll(s.actor, out)
}

func (s *Session) tick(now time.Time) {
	s.mu.Lock()
	var out []follow.Envelope
	switch {
	case s.tk != nil:
		s.tk.Tick(now)
		out = s.tk.Outbox()
		s.takeoverDoneLocked()
	case s.owner != nil && !s.closed:
		out = s.gc.Tick(now)
		s.owner.Tick(now)
		out = append(out, s.gc.Route(s.owner.Outbox(), now)...)
		s.noteLocked()
	}
	s.mu.Unlock()
	s.h.sendAll(s.actor, out)
}

func (s *Session) takeoverDoneLocked() {
	if _, _, done := s.tk.Done(); done && s.tkDone != nil {
		close(s.tkDone)
		s.tkDone = nil
	}
}

// noteLocked records a supersession and wakes the waiters of Acked.
func (s *Session) noteLocked() {
	if s.err == nil {
		if err := s.owner.Superseded(); err != nil {
			s.err = err
			s.h.stats.superseded.Add(1)
		}
	}
	s.noteChangedLocked()
}

func (s *Session) noteChangedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func nodeIDs(ids []string) []follow.FollowerID {
	out := make([]follow.FollowerID, len(ids))
	for i, id := range ids {
		out[i] = follow.FollowerID(id)
	}
	return out
}
