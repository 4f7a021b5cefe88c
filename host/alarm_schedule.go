package host

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// alarmSchedule is when the host looks at actors' alarms next: one time
// per actor, the earliest asked for, in a heap ordered by time. A look
// reads the alarm from the actor's database, which is the truth: a time
// here only says when to read it, so a stale one costs a read and nothing
// else. One goroutine (alarmLoop) serves it, however many actors have
// alarms. Guarded by Host.mu.
type alarmSchedule struct {
	at   map[actorKey]time.Time
	heap alarmHeap
	// wakeups are actors this host hibernated with an alarm pending: at
	// its time the host acquires the actor again, so that the alarm of an
	// idle actor fires on time too.
	wakeups map[actorKey]time.Time
}

func newAlarmSchedule() alarmSchedule {
	return alarmSchedule{at: map[actorKey]time.Time{}, wakeups: map[actorKey]time.Time{}}
}

type alarmItem struct {
	at  time.Time
	key actorKey
}

type alarmHeap []alarmItem

func (q alarmHeap) Len() int           { return len(q) }
func (q alarmHeap) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q alarmHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *alarmHeap) Push(x any)        { *q = append(*q, x.(alarmItem)) }
func (q *alarmHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// scheduleLocked asks for a look at key's alarm at at, unless one is
// asked for already no later. Called with h.mu held.
func (h *Host) scheduleLocked(key actorKey, at time.Time) {
	s := &h.alarms
	if cur, ok := s.at[key]; ok && !at.Before(cur) {
		return
	}
	s.at[key] = at
	heap.Push(&s.heap, alarmItem{at: at, key: key})
	if first := s.heap[0]; first.key == key && first.at.Equal(at) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// scheduleActorLocked asks for a look at an actor's alarm at at, if its
// namespace has a handler here. An actor still opening keeps the time
// until it is open (open). Called with h.mu held.
func (h *Host) scheduleActorLocked(a *Actor, at time.Time) {
	if h.cfg.Alarms[a.key.ns] == nil {
		return
	}
	if a.state != Open {
		if a.alarmPending.IsZero() || at.Before(a.alarmPending) {
			a.alarmPending = at
		}
		return
	}
	h.scheduleLocked(a.key, at)
}

func (h *Host) scheduleActor(a *Actor, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scheduleActorLocked(a, at)
}

// alarmLoop starts the looks that are due, until the host closes.
func (h *Host) alarmLoop() {
	defer h.bg.Done()
	for {
		var wait <-chan time.Time
		h.mu.Lock()
		now := h.clock.Now()
		for s := &h.alarms; s.heap.Len() > 0; {
			it := s.heap[0]
			if it.at.After(now) {
				wait = h.clock.After(it.at.Sub(now))
				break
			}
			heap.Pop(&s.heap)
			if at, ok := s.at[it.key]; !ok || !at.Equal(it.at) {
				continue // superseded by an earlier time, looked at already
			}
			delete(s.at, it.key)
			h.alarmDueLocked(it.key, now)
		}
		h.mu.Unlock()
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake:
		case <-wait:
		}
	}
}

// alarmDueLocked looks at key's alarm: runs it if the actor is open here,
// wakes the actor if this host hibernated it with an alarm due now.
// Called with h.mu held.
func (h *Host) alarmDueLocked(key actorKey, now time.Time) {
	if h.stopErr != nil {
		return
	}
	if a := h.actors[key]; a != nil {
		// Opened again meanwhile: its open read the alarm (and an actor
		// still opening or closing schedules it when it is open, or keeps
		// a wake-up when it hibernates).
		delete(h.alarms.wakeups, key)
		if a.state == Open && !a.drop {
			h.fireLocked(a)
		}
		return
	}
	due, ok := h.alarms.wakeups[key]
	if !ok {
		return
	}
	if now.Before(due) {
		h.scheduleLocked(key, due) // an earlier look, not the wake-up's
		return
	}
	delete(h.alarms.wakeups, key)
	h.bg.Add(1)
	go h.wakeForAlarm(key)
}

// fireLocked starts a run of an open actor's alarm, holding a use of it,
// unless one runs already (it looks at the alarm again when it ends).
// Called with h.mu held.
func (h *Host) fireLocked(a *Actor) {
	if a.alarmBusy {
		return
	}
	a.alarmBusy = true
	a.refs++
	h.bg.Add(1)
	go h.fireAlarm(a)
}

// keepWakeupLocked remembers that a hibernated actor's alarm is due at
// due, so this host acquires it again then. Called with h.mu held, once
// the actor is out of the map.
func (h *Host) keepWakeupLocked(key actorKey, due time.Time) {
	if h.stopErr != nil || h.actors[key] != nil {
		return
	}
	h.alarms.wakeups[key] = due
	h.scheduleLocked(key, due)
}

// wakeForAlarm acquires a hibernated actor whose alarm is due: its open
// reads the alarm and runs it. Held elsewhere meanwhile, its holder runs
// it; any other failure leaves it to the scans, which claim an actor
// nobody holds once its alarm is overdue (the next ones list the whole
// overdue backlog).
func (h *Host) wakeForAlarm(key actorKey) {
	defer h.bg.Done()
	ctx, cancel := context.WithTimeout(h.ctx, openTimeout)
	defer cancel()
	hd, err := h.Acquire(ctx, key.ns, []byte(key.id))
	if err != nil {
		if !errors.Is(err, fence.ErrHeld) && !errors.Is(err, ErrDraining) && h.ctx.Err() == nil {
			// The scans may have listed past the entry already: the next
			// ones list the whole backlog again.
			h.alarmRescans.Add(1)
			h.log.Warn("cannot wake a hibernated actor for its alarm", logattr.Namespace, key.ns, logattr.Actor, frames.ActorKey([]byte(key.id)), logattr.Err, err)
		}
		return
	}
	hd.Release()
}

// alarmToWake returns when a hibernating actor's alarm is due, zero if it
// has none or its namespace no handler here.
func (h *Host) alarmToWake(ctx context.Context, a *Actor) time.Time {
	if h.cfg.Alarms[a.key.ns] == nil {
		return time.Time{}
	}
	pool, err := a.alarmConn()
	if err != nil {
		return time.Time{}
	}
	cur, err := a.readAlarm(ctx, pool)
	if err != nil {
		// Left to the scans: an actor nobody holds is claimed once its
		// alarm is overdue.
		h.log.Warn("hibernating without a wake-up for its alarm", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, err)
		return time.Time{}
	}
	if !cur.set {
		return time.Time{}
	}
	return cur.alarm().Due
}
