package quorum

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/logattr"
)

// Replacing a follower while the session runs.
//
// Every Config.ReplaceCheck the hub lists the live followers once
// (Directory.Candidates) and looks at every session's set with it: a
// follower the owner stopped sending to (follow.FollowerStatus.Failed: it
// refused as full or broken) or one no live node serves (no longer listed:
// its node's lease ran out and no process took its store over) is
// replaced by a live candidate outside the set, in follow's three steps
// (follow: "Replacing a follower"). ChangeSet sends the newcomers a reset
// with everything past the bucket's durable point; once q followers of the
// new set hold everything that may have been acknowledged (Owner.Pending
// reports ready), own.json records the new set, with a write conditional
// on this claim (Directory.Record), and only once it landed does the new
// set alone count (Owner.Recorded). That write is the one I/O of a
// session's step: it runs on a goroutine of its own, outside the session's
// lock, so a slow bucket holds up no other session; Close waits for it.
//
// A change that is not ready within ReplaceWait, or whose newcomer failed
// or died, is cancelled (nothing recorded it yet), and that candidate is
// passed over for ReplaceWait. A set with no candidate to spare keeps its
// dead follower: it acknowledges with the rest while q of it are alive, by
// the bucket when not. A failed write of own.json is tried again at the
// next check; one that finds a newer owner (fence.ErrFenced) ends the
// session's acknowledgements (Session.Err), as a fenced follower does.
// The set keeps its size: a session that started with fewer followers than
// Config.Followers (too few live nodes then) does not grow.

// Defaults of Config.ReplaceCheck and Config.ReplaceWait.
const (
	// DefaultReplaceCheck is how often the hub looks for followers to
	// replace. A dead follower is seen once its lease ran out and the
	// directory's listing (CandidatesCache) shows it, so a second more
	// hardly matters; a check costs a look at that cached listing.
	DefaultReplaceCheck = time.Second
	// DefaultReplaceWait bounds a change that does not get ready: a reset
	// with the whole tail (16 MiB at most) takes well under a second on a
	// live follower, so 10 s means the newcomer is not answering.
	DefaultReplaceWait = 10 * time.Second
	// recordTimeout bounds one write of own.json.
	recordTimeout = 10 * time.Second
)

// replacing is what a session remembers of its changes of the set.
type replacing struct {
	began     time.Time                       // when the change under way started
	avoid     map[follow.FollowerID]time.Time // newcomers that did not get ready, until when
	recording chan struct{}                   // closed when the write of own.json under way ends; nil: none
}

// replaceLoop checks every session's set each Config.ReplaceCheck, with
// one listing of the live followers for all of them.
func (h *Hub) replaceLoop() {
	h.everySession(h.replaceDone, h.cfg.ReplaceCheck, func(now time.Time, ss []*Session) {
		if len(ss) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		defer cancel()
		cands, err := h.cfg.Directory.Candidates(ctx)
		if err != nil { // a failed listing says nothing changed
			return
		}
		for _, s := range ss {
			s.replaceStep(ctx, cands, now)
		}
	})
}

// replaceStep takes one step of a change of the set, or starts one, with
// cands the live followers.
func (s *Session) replaceStep(ctx context.Context, cands []follow.FollowerID, now time.Time) {
	s.mu.Lock()
	if s.owner == nil || s.closed || s.err != nil || s.repl.recording != nil {
		s.mu.Unlock()
		return
	}
	o := s.owner
	next, ready := o.Pending()
	status := o.Followers()
	if next != nil && ready {
		done := make(chan struct{})
		s.repl.recording = done
		own, q := s.own, s.q
		s.mu.Unlock()
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
			defer cancel()
			s.record(ctx, o, own, next, q)
		}()
		return
	}
	s.mu.Unlock()

	live := liveSet(cands)
	s.noteUnreachable(o, status, live)
	if next != nil {
		s.watchJoining(o, status, live, now)
	} else {
		s.replaceBad(ctx, o, status, cands, live, now)
	}
}

// awaitRecording waits for a write of own.json under way; called once the
// session is closed, so that none starts after.
func (s *Session) awaitRecording() {
	s.mu.Lock()
	done := s.repl.recording
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// noteUnreachable records which members no live node serves, for Acked:
// with fewer than q reachable, a Durable asks the bucket at once instead
// of waiting session.Config.PeerWait for followers that cannot answer.
func (s *Session) noteUnreachable(o *follow.Owner, status []follow.FollowerStatus, live map[follow.FollowerID]bool) {
	var gone map[follow.FollowerID]bool
	for _, f := range status {
		if !live[f.ID] {
			if gone == nil {
				gone = map[follow.FollowerID]bool{}
			}
			gone[f.ID] = true
		}
	}
	s.mu.Lock()
	if s.owner == o && !maps.Equal(gone, s.unreachable) {
		s.unreachable = gone
		s.noteChangedLocked()
	}
	s.mu.Unlock()
}

// record writes the ready set into own.json and tells the owner.
func (s *Session) record(ctx context.Context, o *follow.Owner, own fence.Ownership, next []follow.FollowerID, q int) {
	rec, err := s.h.cfg.Directory.Record(ctx, own, next, q)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repl.recording = nil
	if s.owner != o || s.closed {
		return
	}
	switch {
	case errors.Is(err, fence.ErrFenced):
		if s.err == nil {
			s.err = fmt.Errorf("quorum: replacing followers of %s: %w", s.actor, err)
			s.h.stats.superseded.Add(1)
		}
		s.noteChangedLocked()
		return
	case err != nil:
		s.h.log.Warn("recording a new follower set", logattr.Actor, s.actor, logattr.Followers, next, logattr.Err, err)
		return
	}
	s.own = rec
	old := s.memberSet()
	if err := o.Recorded(next); err != nil {
		// Pending said ready and nothing else changes the set: a bug.
		s.h.log.Error("owner refused the recorded set", logattr.Actor, s.actor, logattr.Followers, next, logattr.Err, err)
		return
	}
	for _, id := range old {
		if !slices.Contains(next, id) {
			s.gc.Forget(id)
		}
	}
	s.h.stats.replaced.Add(int64(countNew(old, next)))
	s.h.log.Info("replaced followers", logattr.Actor, s.actor, "from", old, "to", next, logattr.Quorum, q)
	s.noteChangedLocked()
}

// watchJoining cancels a change whose newcomer failed, died, or did not
// get ready within ReplaceWait.
func (s *Session) watchJoining(o *follow.Owner, status []follow.FollowerStatus, live map[follow.FollowerID]bool, now time.Time) {
	var stuck []follow.FollowerID
	s.mu.Lock()
	late := now.Sub(s.repl.began) >= s.h.cfg.ReplaceWait
	s.mu.Unlock()
	for _, f := range status {
		if !f.Member && (f.Failed != nil || !live[f.ID] || late) {
			stuck = append(stuck, f.ID)
		}
	}
	if len(stuck) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != o || s.closed {
		return
	}
	if err := o.Cancel(); err != nil {
		return // got ready meanwhile: the next step records it
	}
	for _, id := range stuck {
		s.repl.avoid[id] = now.Add(s.h.cfg.ReplaceWait)
		s.gc.Forget(id)
	}
	s.h.log.Warn("gave up replacing followers", logattr.Actor, s.actor, "newcomers", stuck)
}

// replaceBad starts replacing the failed and dead followers of the set
// with live candidates outside it.
func (s *Session) replaceBad(ctx context.Context, o *follow.Owner, status []follow.FollowerStatus,
	cands []follow.FollowerID, live map[follow.FollowerID]bool, now time.Time) {
	set := make([]follow.FollowerID, 0, len(status))
	var bad []int
	for _, f := range status {
		if f.Member {
			if f.Failed != nil || !live[f.ID] {
				bad = append(bad, len(set))
			}
			set = append(set, f.ID)
		}
	}
	if len(bad) == 0 {
		return
	}
	s.mu.Lock()
	avoid := maps.Clone(s.repl.avoid)
	s.mu.Unlock()
	newcomers := s.choose(ctx, cands, len(bad), func(id follow.FollowerID) bool {
		return slices.Contains(set, id) || now.Before(avoid[id])
	})
	if len(newcomers) == 0 {
		return // nobody to spare: the set goes on without them
	}
	next := slices.Clone(set)
	for i, id := range newcomers {
		next[bad[i]] = id
	}
	s.mu.Lock()
	if s.owner != o || s.closed {
		s.mu.Unlock()
		return
	}
	if err := o.ChangeSet(next); err != nil {
		s.mu.Unlock()
		s.h.log.Error("changing the follower set", logattr.Actor, s.actor, logattr.Followers, next, logattr.Err, err)
		return
	}
	s.repl.began = now
	out := s.gc.Route(o.Outbox(), now)
	s.noteLocked()
	s.mu.Unlock()
	s.h.log.Info("replacing followers", logattr.Actor, s.actor, "from", set, "to", next)
	s.h.sendAll(s.actor, out)
}

// choose returns up to n of cands, in their order, that the transport can
// reach: never this node, never one twice, none that skip refuses.
func (s *Session) choose(ctx context.Context, cands []follow.FollowerID, n int, skip func(follow.FollowerID) bool) []follow.FollowerID {
	var out []follow.FollowerID
	for _, id := range cands {
		if len(out) == n {
			break
		}
		if id == s.h.cfg.Self || slices.Contains(out, id) || skip(id) {
			continue
		}
		if err := s.h.cfg.Directory.Locate(ctx, id); err != nil {
			s.h.log.Info("follower candidate not located", logattr.Actor, s.actor, logattr.Node, id, logattr.Err, err)
			continue
		}
		out = append(out, id)
	}
	return out
}

func liveSet(cands []follow.FollowerID) map[follow.FollowerID]bool {
	live := make(map[follow.FollowerID]bool, len(cands))
	for _, id := range cands {
		live[id] = true
	}
	return live
}

// memberSet is the set own.json records, in order; s.mu held.
func (s *Session) memberSet() []follow.FollowerID {
	var set []follow.FollowerID
	for _, f := range s.owner.Followers() {
		if f.Member {
			set = append(set, f.ID)
		}
	}
	return set
}

func countNew(old, next []follow.FollowerID) int {
	n := 0
	for _, id := range next {
		if !slices.Contains(old, id) {
			n++
		}
	}
	return n
}
