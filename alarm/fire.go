package alarm

import (
	"context"
	"fmt"
	"time"

	"github.com/framectl/framectl/internal/logattr"
)

// Run is one run of an alarm, as its handler gets it.
type Run struct {
	// Alarm is the alarm that is due, as the actor's database holds it.
	Alarm
	// Retry is 0 for the first run and n for the nth retry after runs
	// that failed. It is counted by the node that runs it: an actor that
	// moves to another node starts again from 0 there.
	Retry int
}

// Retries of a failing alarm handler, as Durable Objects do: the first
// retry Config.Backoff (DefaultBackoff) after the run that failed, each
// later one twice as long after the one before (2, 4, 8, 16, 32, 64 s),
// maxRetries of them; an alarm whose last retry fails too is cleared and
// logged as an error (Durable Objects drop it as well).
const (
	DefaultBackoff = 2 * time.Second
	maxRetries     = 6
)

// retry is a failed alarm's next run, under Service.mu.
type retry struct {
	ran Alarm
	n   int       // retries done
	at  time.Time // when the next one runs
}

func sameAlarm(x, y Alarm) bool { return x.Gen == y.Gen && x.Due.UnixMilli() == y.Due.UnixMilli() }

// fire runs the actor's alarm if it is due, with a use of the actor
// taken for it (startFire), and schedules the next look.
func (s *Session) fire() {
	svc := s.svc
	defer svc.bg.Done()
	next, ran, err := s.run()
	svc.mu.Lock()
	s.busy = false
	if !next.IsZero() && s.phase == serving && !svc.stopped {
		svc.scheduleLocked(s.key, next)
	}
	svc.mu.Unlock()
	if err != nil && svc.ctx.Err() == nil {
		svc.log.Warn("alarm", logattr.Namespace, s.key.Namespace, logattr.Actor, s.key.hex(), logattr.Err, err)
	}
	s.actor.Release(ran)
}

// awaitedCommitLocked looks at the actor's alarm again once it committed
// after a look that found a set due but not committed yet (a transaction
// that commits after the alarm's time). Called with svc.mu held.
func (svc *Service) awaitedCommitLocked(s *Session) {
	if !s.await || s.phase != serving || s.actor.Commits() <= s.commits {
		return
	}
	s.await = false
	svc.scheduleSessionLocked(s, svc.clock.Now())
}

// run reads the actor's alarm, runs it if it is due (and its retry, if it
// failed before, is due), and returns when to look again: the alarm's
// time, its next retry, or the alarm the handler set; zero for none. ran
// reports whether the handler ran.
func (s *Session) run() (next time.Time, ran bool, err error) {
	svc := s.svc
	ctx, cancel := context.WithTimeout(svc.ctx, settleTimeout)
	pool, err := s.conn()
	if err != nil {
		cancel()
		return time.Time{}, false, err
	}
	// Counted before the read: a commit after it is looked at again.
	commits := s.actor.Commits()
	cur, err := s.read(ctx, pool)
	cancel()
	if err != nil {
		return time.Time{}, false, err
	}
	now := svc.clock.Now()
	if (!cur.set || now.Before(cur.alarm().Due)) && s.setInFlight(cur, now) {
		svc.mu.Lock()
		s.await, s.commits = true, commits
		svc.mu.Unlock()
	}
	if !cur.set {
		s.setRetry(retry{})
		return time.Time{}, false, nil
	}
	return s.runDue(pool, cur.alarm())
}

// runDue runs the alarm the database holds if it is due, or its retry is.
func (s *Session) runDue(pool Querier, ran Alarm) (next time.Time, didRun bool, err error) {
	svc := s.svc
	svc.mu.Lock()
	r := s.retry
	svc.mu.Unlock()
	if !sameAlarm(r.ran, ran) {
		// Set again (or first seen): a new alarm starts from its time.
		r = retry{ran: ran, at: ran.Due}
		s.setRetry(retry{})
	}
	if svc.clock.Now().Before(r.at) {
		return r.at, false, nil
	}

	log := svc.log.With(logattr.Namespace, s.key.Namespace, logattr.Actor, s.key.hex(), "due", ran.Due, "gen", ran.Gen, "retry", r.n)
	log.Debug("alarm running")
	began := svc.clock.Now()
	runErr := s.call(Run{Alarm: ran, Retry: r.n})
	if svc.ctx.Err() != nil {
		return time.Time{}, true, nil // closing: whoever holds it next runs it
	}
	ctx, cancel := context.WithTimeout(svc.ctx, settleTimeout)
	defer cancel()
	if runErr == nil {
		runErr = s.clearRan(ctx, pool, ran)
	}
	svc.stats.ran(r.n, began.Sub(ran.Due), runErr)
	if runErr == nil {
		log.Debug("alarm ran", "late", svc.clock.Now().Sub(ran.Due))
		s.setRetry(retry{})
		next, err := s.next(ctx, pool)
		return next, true, err
	}
	if s.actor.Unusable() != nil {
		// This session can write nothing more (fenced, node lost): the
		// alarm is not cleared, and the actor's next session runs it
		// again.
		return time.Time{}, true, runErr
	}
	if r.n >= maxRetries {
		log.Error("alarm handler failed on every retry: alarm given up", "runs", r.n+1, logattr.Err, runErr)
		svc.stats.dropped.Add(1)
		s.setRetry(retry{})
		if err := s.clearRan(ctx, pool, ran); err != nil {
			return time.Time{}, true, err
		}
		next, err := s.next(ctx, pool)
		return next, true, err
	}
	r.n++
	r.at = svc.clock.Now().Add(svc.cfg.Backoff << (r.n - 1))
	s.setRetry(r)
	log.Warn("alarm handler failed; retrying", "next", r.at, logattr.Err, runErr)
	return r.at, true, nil
}

// call runs the handler under Config.Timeout, cut short if the node that
// claimed the actor is lost: that session can no longer clear the alarm,
// and the next one runs it again.
func (s *Session) call(run Run) error {
	ctx, cancel := context.WithTimeout(s.svc.ctx, s.svc.cfg.Timeout)
	defer cancel()
	go func() {
		select {
		case <-s.actor.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.actor.Run(ctx, run); err != nil {
		return fmt.Errorf("alarm: %s: alarm handler: %w", s, err)
	}
	return nil
}

// clearRan clears the alarm that ran, if the database still holds it,
// and waits until that is durable (the settle after the run's release
// then deletes its index entry).
func (s *Session) clearRan(ctx context.Context, pool Querier, ran Alarm) error {
	if _, err := s.Clear(ctx, pool, ran); err != nil {
		return err
	}
	if err := s.actor.Durable(ctx); err != nil {
		return fmt.Errorf("alarm: %s: clearing the alarm that ran: %w", s, err)
	}
	return nil
}

// next reads the alarm the database holds after a run: one the handler
// (or a request) set meanwhile.
func (s *Session) next(ctx context.Context, pool Querier) (time.Time, error) {
	cur, err := s.read(ctx, pool)
	if err != nil || !cur.set {
		return time.Time{}, err
	}
	return cur.alarm().Due, nil
}

func (s *Session) setRetry(r retry) {
	s.svc.mu.Lock()
	s.retry = r
	s.svc.mu.Unlock()
}
