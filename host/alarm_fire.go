package host

import (
	"context"
	"fmt"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// AlarmFunc runs an actor's alarm, on the node that holds the actor, once
// it is due. It returns nil when the alarm's work is done: the host then
// clears the alarm, unless it was set again meanwhile (by the handler
// itself, or a request), and the alarm's index entry is deleted once the
// clear is durable. An error runs it again later (retries with backoff);
// so does a run cut short by the node's death: delivery is at least once.
// Its ctx ends at Config.AlarmTimeout, when the host closes, or when the
// node is lost.
type AlarmFunc func(ctx context.Context, a *Actor, run AlarmRun) error

// AlarmRun is one run of an alarm.
type AlarmRun struct {
	// Alarm is the alarm that is due, as the actor's database holds it.
	Alarm
	// Retry is 0 for the first run and n for the nth retry after runs
	// that failed. It is counted by the host that runs it: an actor that
	// moves to another node starts again from 0 there.
	Retry int
}

// Retries of a failing alarm handler, as Durable Objects do: the first
// retry alarmBackoff after the run that failed, each later one twice as
// long after the one before (2, 4, 8, 16, 32, 64 s), maxAlarmRetries of
// them; an alarm whose last retry fails too is cleared and logged as an
// error (Durable Objects drop it as well).
const (
	alarmBackoff    = 2 * time.Second
	maxAlarmRetries = 6
)

// alarmRetry is a failed alarm's next run, under Host.mu.
type alarmRetry struct {
	ran Alarm
	n   int       // retries done
	at  time.Time // when the next one runs
}

func sameAlarm(x, y Alarm) bool { return x.Gen == y.Gen && x.Due.UnixMilli() == y.Due.UnixMilli() }

// fireAlarm runs the actor's alarm if it is due, with a use of the actor
// taken by fireLocked, and schedules the next look.
func (h *Host) fireAlarm(a *Actor) {
	defer h.bg.Done()
	next, ran, err := h.runAlarm(a)
	h.mu.Lock()
	a.alarmBusy = false
	if !next.IsZero() && a.state == Open && !a.drop && h.stopErr == nil {
		h.scheduleLocked(a.key, next)
	}
	h.mu.Unlock()
	if err != nil && h.ctx.Err() == nil {
		h.log.Warn("alarm", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, err)
	}
	h.releaseUse(a, ran)
}

// awaitedCommitLocked looks at the actor's alarm again once it committed
// after a look that found a set due but not committed yet (a transaction
// that commits after the alarm's time). Called with h.mu held.
func (h *Host) awaitedCommitLocked(a *Actor) {
	if !a.alarmAwait || a.state != Open || a.db.Stats().Commits <= a.alarmCommits {
		return
	}
	a.alarmAwait = false
	h.scheduleActorLocked(a, h.clock.Now())
}

// runAlarm reads the actor's alarm, runs it if it is due (and its retry,
// if it failed before, is due), and returns when to look again: the
// alarm's time, its next retry, or the alarm the handler set; zero for
// none. ran reports whether the handler ran.
func (h *Host) runAlarm(a *Actor) (next time.Time, ran bool, err error) {
	ctx, cancel := context.WithTimeout(h.ctx, settleTimeout)
	pool, err := a.alarmConn()
	if err != nil {
		cancel()
		return time.Time{}, false, err
	}
	// Counted before the read: a commit after it is looked at again.
	commits := a.db.Stats().Commits
	cur, err := a.readAlarm(ctx, pool)
	cancel()
	if err != nil {
		return time.Time{}, false, err
	}
	now := h.clock.Now()
	if (!cur.set || now.Before(cur.alarm().Due)) && a.setInFlight(cur, now) {
		h.mu.Lock()
		a.alarmAwait, a.alarmCommits = true, commits
		h.mu.Unlock()
	}
	if !cur.set {
		h.setRetry(a, alarmRetry{})
		return time.Time{}, false, nil
	}
	return h.runDue(a, pool, cur.alarm())
}

// runDue runs the alarm the database holds if it is due, or its retry is.
func (h *Host) runDue(a *Actor, pool Querier, ran Alarm) (next time.Time, didRun bool, err error) {
	h.mu.Lock()
	retry := a.alarmRetry
	h.mu.Unlock()
	if !sameAlarm(retry.ran, ran) {
		// Set again (or first seen): a new alarm starts from its time.
		retry = alarmRetry{ran: ran, at: ran.Due}
		h.setRetry(a, alarmRetry{})
	}
	if h.clock.Now().Before(retry.at) {
		return retry.at, false, nil
	}

	log := h.log.With(logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), "due", ran.Due, "gen", ran.Gen, "retry", retry.n)
	log.Debug("alarm running")
	began := h.clock.Now()
	runErr := h.callAlarm(a, AlarmRun{Alarm: ran, Retry: retry.n})
	if h.ctx.Err() != nil {
		return time.Time{}, true, nil // closing: whoever holds it next runs it
	}
	ctx, cancel := context.WithTimeout(h.ctx, settleTimeout)
	defer cancel()
	if runErr == nil {
		runErr = h.clearRan(ctx, a, pool, ran)
	}
	h.stats.alarmRan(retry.n, began.Sub(ran.Due), runErr)
	if runErr == nil {
		log.Debug("alarm ran", "late", h.clock.Now().Sub(ran.Due))
		h.setRetry(a, alarmRetry{})
		next, err := h.nextAlarm(ctx, a, pool)
		return next, true, err
	}
	if a.unusable() != nil {
		// This session can write nothing more (fenced, node lost): the
		// alarm is not cleared, and the actor's next session runs it
		// again.
		return time.Time{}, true, runErr
	}
	if retry.n >= maxAlarmRetries {
		log.Error("alarm handler failed on every retry: alarm given up", "runs", retry.n+1, logattr.Err, runErr)
		h.stats.alarmsDropped.Add(1)
		h.setRetry(a, alarmRetry{})
		if err := h.clearRan(ctx, a, pool, ran); err != nil {
			return time.Time{}, true, err
		}
		next, err := h.nextAlarm(ctx, a, pool)
		return next, true, err
	}
	retry.n++
	retry.at = h.clock.Now().Add(h.cfg.alarmBackoff << (retry.n - 1))
	h.setRetry(a, retry)
	log.Warn("alarm handler failed; retrying", "next", retry.at, logattr.Err, runErr)
	return retry.at, true, nil
}

// callAlarm runs the handler under Config.AlarmTimeout, cut short if the
// node that claimed the actor is lost: that session can no longer clear
// the alarm, and the next one runs it again.
func (h *Host) callAlarm(a *Actor, run AlarmRun) error {
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.AlarmTimeout)
	defer cancel()
	go func() {
		select {
		case <-a.node.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := h.cfg.Alarms[a.key.ns](ctx, a, run); err != nil {
		return fmt.Errorf("host: %s: alarm handler: %w", a, err)
	}
	return nil
}

// clearRan clears the alarm that ran, if the database still holds it,
// and waits until that is durable (the settle after the run's release
// then deletes its index entry).
func (h *Host) clearRan(ctx context.Context, a *Actor, pool Querier, ran Alarm) error {
	if _, err := a.ClearAlarm(ctx, pool, ran); err != nil {
		return err
	}
	if err := a.db.Durable(ctx); err != nil {
		return fmt.Errorf("host: %s: clearing the alarm that ran: %w", a, err)
	}
	return nil
}

// nextAlarm reads the alarm the database holds after a run: one the
// handler (or a request) set meanwhile.
func (h *Host) nextAlarm(ctx context.Context, a *Actor, pool Querier) (time.Time, error) {
	cur, err := a.readAlarm(ctx, pool)
	if err != nil || !cur.set {
		return time.Time{}, err
	}
	return cur.alarm().Due, nil
}

func (h *Host) setRetry(a *Actor, r alarmRetry) {
	h.mu.Lock()
	a.alarmRetry = r
	h.mu.Unlock()
}
