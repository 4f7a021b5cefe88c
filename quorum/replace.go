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
)

// Replacing a follower while the session runs.
//
// Every Config.ReplaceCheck a session looks at its set: a follower the
// owner stopped sending to (follow.FollowerStatus.Failed: it refused as
// full or broken) or one no live node serves (Directory.Candidates no
// longer lists it: its node's lease ran out and no process took its store
// over) is replaced by a live candidate outside the set, in follow's three
// steps (follow: "Replacing a follower"). ChangeSet sends the newcomers a
// reset with everything past the bucket's durable point; once q followers
// of the new set hold everything that may have been acknowledged
// (Owner.Pending reports ready), own.json records the new set, with a write
// conditional on this claim (Directory.Record), and only once it landed
// does the new set alone count (Owner.Recorded). The write is the one I/O,
// done outside the session's lock, never on the ticker.
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
	// DefaultReplaceCheck is how often a session looks for followers to
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

// replacing is a session's replacement loop and what it remembers.
type replacing struct {
	stop, done chan struct{}
	began      time.Time                   // when the change under way started
	avoid      map[follow.NodeID]time.Time // newcomers that did not get ready, until when
}

// startReplacing runs the replacement loop until stopReplacing; called
// with s.mu held, once the owner started.
func (s *Session) startReplacing() {
	r := &replacing{stop: make(chan struct{}), done: make(chan struct{}), avoid: map[follow.NodeID]time.Time{}}
	s.repl = r
	go func() {
		defer close(r.done)
		t := time.NewTicker(s.h.cfg.ReplaceCheck)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-s.h.stop:
				return
			case now := <-t.C:
				s.replaceStep(r, now)
			}
		}
	}()
}

// stopReplacing ends the loop and waits for it: a write of own.json under
// way finishes first, so the ownership Close returns is own.json's.
func (s *Session) stopReplacing() {
	s.mu.Lock()
	r := s.repl
	s.repl = nil
	s.mu.Unlock()
	if r != nil {
		close(r.stop)
		<-r.done
	}
}

// replaceStep takes one step of a change of the set, or starts one.
func (s *Session) replaceStep(r *replacing, now time.Time) {
	s.mu.Lock()
	if s.owner == nil || s.closed || s.err != nil {
		s.mu.Unlock()
		return
	}
	o := s.owner
	next, ready := o.Pending()
	status := o.Followers()
	own, q := s.own, s.q
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	cands, err := s.h.cfg.Directory.Candidates(ctx)
	if err != nil {
		return // the listing failed: nothing is known to have changed
	}
	live := liveSet(cands)
	s.noteUnreachable(o, status, live)
	switch {
	case next != nil && ready:
		s.record(ctx, o, own, next, q)
	case next != nil:
		s.watchJoining(r, o, status, live, now)
	default:
		s.replaceBad(ctx, r, o, status, cands, live, now)
	}
}

// noteUnreachable records which members no live node serves, for Acked:
// with fewer than q reachable, a Durable asks the bucket at once instead
// of waiting vfs.Config.PeerWait for followers that cannot answer.
func (s *Session) noteUnreachable(o *follow.Owner, status []follow.FollowerStatus, live map[follow.NodeID]bool) {
	var gone map[follow.NodeID]bool
	for _, f := range status {
		if !live[f.ID] {
			if gone == nil {
				gone = map[follow.NodeID]bool{}
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
func (s *Session) record(ctx context.Context, o *follow.Owner, own fence.Ownership, next []follow.NodeID, q int) {
	rec, err := s.h.cfg.Directory.Record(ctx, own, next, q)
	s.mu.Lock()
	defer s.mu.Unlock()
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
		s.h.log.Warn("recording a new follower set", "actor", s.actor, "followers", next, "err", err)
		return
	}
	s.own = rec
	old := s.memberSet()
	if err := o.Recorded(next); err != nil {
		// Pending said ready and nothing else changes the set: a bug.
		s.h.log.Error("owner refused the recorded set", "actor", s.actor, "followers", next, "err", err)
		return
	}
	for _, id := range old {
		if !slices.Contains(next, id) {
			delete(s.windows, id)
		}
	}
	s.h.stats.replaced.Add(int64(countNew(old, next)))
	s.h.log.Info("replaced followers", "actor", s.actor, "from", old, "to", next, "quorum", q)
	s.noteChangedLocked()
}

// watchJoining cancels a change whose newcomer failed, died, or did not
// get ready within ReplaceWait.
func (s *Session) watchJoining(r *replacing, o *follow.Owner, status []follow.FollowerStatus, live map[follow.NodeID]bool, now time.Time) {
	var stuck []follow.NodeID
	late := now.Sub(r.began) >= s.h.cfg.ReplaceWait
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
		r.avoid[id] = now.Add(s.h.cfg.ReplaceWait)
		delete(s.windows, id)
	}
	s.h.log.Warn("gave up replacing followers", "actor", s.actor, "newcomers", stuck)
}

// replaceBad starts replacing the failed and dead followers of the set
// with live candidates outside it.
func (s *Session) replaceBad(ctx context.Context, r *replacing, o *follow.Owner, status []follow.FollowerStatus,
	cands []follow.NodeID, live map[follow.NodeID]bool, now time.Time) {
	set := make([]follow.NodeID, 0, len(status))
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
	next := slices.Clone(set)
	replaced := 0
	for _, id := range cands {
		if replaced == len(bad) {
			break
		}
		if id == s.h.cfg.Self || slices.Contains(set, id) || now.Before(r.avoid[id]) {
			continue
		}
		if err := s.h.cfg.Directory.Locate(ctx, id); err != nil {
			continue
		}
		next[bad[replaced]] = id
		replaced++
	}
	if replaced == 0 {
		return // nobody to spare: the set goes on without them
	}
	s.mu.Lock()
	if s.owner != o || s.closed {
		s.mu.Unlock()
		return
	}
	if err := o.ChangeSet(next); err != nil {
		s.mu.Unlock()
		s.h.log.Error("changing the follower set", "actor", s.actor, "followers", next, "err", err)
		return
	}
	r.began = now
	out := s.route(o.Outbox(), now)
	s.noteLocked()
	s.mu.Unlock()
	s.h.log.Info("replacing followers", "actor", s.actor, "from", set, "to", next)
	s.h.sendAll(s.actor, out)
}

func liveSet(cands []follow.NodeID) map[follow.NodeID]bool {
	live := make(map[follow.NodeID]bool, len(cands))
	for _, id := range cands {
		live[id] = true
	}
	return live
}

// memberSet is the set own.json records, in order; s.mu held.
func (s *Session) memberSet() []follow.NodeID {
	var set []follow.NodeID
	for _, f := range s.owner.Followers() {
		if f.Member {
			set = append(set, f.ID)
		}
	}
	return set
}

func countNew(old, next []follow.NodeID) int {
	n := 0
	for _, id := range next {
		if !slices.Contains(old, id) {
			n++
		}
	}
	return n
}
