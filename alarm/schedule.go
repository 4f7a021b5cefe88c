package alarm

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/internal/logattr"
)

// schedule is when the Service looks at actors' alarms next: one time per
// actor, the earliest asked for, in a heap ordered by time. A look reads
// the alarm from the actor's database, which is the truth: a time here
// only says when to read it, so a stale one costs a read and nothing
// else. One goroutine (Service.loop) serves it, however many actors have
// alarms. Guarded by Service.mu.
type schedule struct {
	at   map[Key]time.Time
	heap timeHeap
	// wakeups are actors this node hibernated with an alarm pending: at
	// its time the Service acquires the actor again, so that the alarm of
	// an idle actor fires on time too.
	wakeups map[Key]time.Time
}

func newSchedule() schedule {
	return schedule{at: map[Key]time.Time{}, wakeups: map[Key]time.Time{}}
}

type item struct {
	at  time.Time
	key Key
}

type timeHeap []item

func (q timeHeap) Len() int           { return len(q) }
func (q timeHeap) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q timeHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *timeHeap) Push(x any)        { *q = append(*q, x.(item)) }
func (q *timeHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// scheduleLocked asks for a look at key's alarm at at, unless one is
// asked for already no later. Called with svc.mu held.
func (svc *Service) scheduleLocked(key Key, at time.Time) {
	s := &svc.sched
	if cur, ok := s.at[key]; ok && !at.Before(cur) {
		return
	}
	s.at[key] = at
	heap.Push(&s.heap, item{at: at, key: key})
	if first := s.heap[0]; first.key == key && first.at.Equal(at) {
		select {
		case svc.wake <- struct{}{}:
		default:
		}
	}
}

// scheduleSessionLocked asks for a look at a session's alarm at at, if
// its namespace has a handler here. A session whose actor is not serving
// (still opening) keeps the time until it is (Opened). Called with svc.mu
// held.
func (svc *Service) scheduleSessionLocked(s *Session, at time.Time) {
	if !svc.handles(s.key.Namespace) {
		return
	}
	if s.phase != serving {
		if s.pending.IsZero() || at.Before(s.pending) {
			s.pending = at
		}
		return
	}
	svc.scheduleLocked(s.key, at)
}

func (svc *Service) schedule(s *Session, at time.Time) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	svc.scheduleSessionLocked(s, at)
}

// loop starts the looks that are due, until ctx ends.
func (svc *Service) loop() {
	defer svc.bg.Done()
	for {
		var (
			wait <-chan time.Time
			fire []*Session
		)
		svc.mu.Lock()
		now := svc.clock.Now()
		for s := &svc.sched; s.heap.Len() > 0; {
			it := s.heap[0]
			if it.at.After(now) {
				wait = svc.clock.After(it.at.Sub(now))
				break
			}
			heap.Pop(&s.heap)
			if at, ok := s.at[it.key]; !ok || !at.Equal(it.at) {
				continue // superseded by an earlier time, looked at already
			}
			delete(s.at, it.key)
			if a := svc.dueLocked(it.key, now); a != nil {
				fire = append(fire, a)
			}
		}
		svc.mu.Unlock()
		// The uses are the host's to give: taken without svc.mu, which
		// the host's lock comes before.
		for _, s := range fire {
			s.startFire(s.actor.Use())
		}
		select {
		case <-svc.ctx.Done():
			return
		case <-svc.wake:
		case <-wait:
		}
	}
}

// dueLocked looks at key's alarm: returns the session to run it (marked
// busy) if the actor serves here, wakes the actor if this node hibernated
// it with an alarm due now. Called with svc.mu held.
func (svc *Service) dueLocked(key Key, now time.Time) *Session {
	if svc.stopped {
		return nil
	}
	if s := svc.sessions[key]; s != nil {
		// Opened again meanwhile: its open read the alarm (and an actor
		// still opening or closing schedules it when it serves, or keeps
		// a wake-up when it hibernates).
		delete(svc.sched.wakeups, key)
		if s.phase == serving && !s.busy {
			s.busy = true
			return s
		}
		return nil
	}
	due, ok := svc.sched.wakeups[key]
	if !ok {
		return nil
	}
	if now.Before(due) {
		svc.scheduleLocked(key, due) // an earlier look, not the wake-up's
		return nil
	}
	delete(svc.sched.wakeups, key)
	svc.bg.Add(1)
	go svc.wakeForAlarm(key)
	return nil
}

// startFire starts a run of a serving actor's alarm that dueLocked marked
// busy, holding the use of it the caller took (ok). One run at a time: a
// look while one runs is left to it, as it looks at the alarm again when
// it ends.
func (s *Session) startFire(ok bool) { s.startWithUse(ok, &s.busy, s.fire) }

// wakeForAlarm acquires a hibernated actor whose alarm is due: its open
// reads the alarm and runs it. Held elsewhere meanwhile, its holder runs
// it; any other failure leaves it to the scans, which claim an actor
// nobody holds once its alarm is overdue (the next ones list the whole
// overdue backlog).
func (svc *Service) wakeForAlarm(key Key) {
	defer svc.bg.Done()
	ctx, cancel := context.WithTimeout(svc.ctx, acquireTimeout)
	defer cancel()
	_, release, err := svc.host.Acquire(ctx, key)
	if err != nil {
		if worthAWarning(err) && svc.ctx.Err() == nil {
			// The scans may have listed past the entry already: the next
			// ones list the whole backlog again.
			svc.rescans.Add(1)
			svc.log.Warn("cannot wake a hibernated actor for its alarm", logattr.Namespace, key.Namespace, logattr.Actor, key.hex(), logattr.Err, err)
		}
		return
	}
	release()
}

// worthAWarning reports whether a failed Acquire of the alarms' is worth
// a warning: not when a live node elsewhere holds the actor (it runs the
// alarm) or this node claims no more (it drains: the other nodes do).
func worthAWarning(err error) bool {
	return !errors.Is(err, fence.ErrHeld) && !errors.Is(err, fence.ErrNotClaiming)
}

// wakeAt returns when a hibernating actor's alarm is due, zero if it has
// none or its namespace no handler here.
func (s *Session) wakeAt(ctx context.Context) time.Time {
	if !s.svc.handles(s.key.Namespace) {
		return time.Time{}
	}
	pool, err := s.conn()
	if err != nil {
		return time.Time{}
	}
	cur, err := s.read(ctx, pool)
	if err != nil {
		// Left to the scans: an actor nobody holds is claimed once its
		// alarm is overdue.
		s.svc.log.Warn("hibernating without a wake-up for its alarm", logattr.Namespace, s.key.Namespace, logattr.Actor, s.key.hex(), logattr.Err, err)
		return time.Time{}
	}
	if !cur.set {
		return time.Time{}
	}
	return cur.alarm().Due
}
