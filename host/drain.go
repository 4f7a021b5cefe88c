package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// DrainFunc is a namespace's drain hook (Config.Drain). It runs once per
// open actor of the namespace when the host drains, while the actor still
// serves (concurrently with its Handles: there is no input gate), to write
// what the runtime keeps in memory to the actor's database. Its writes need
// not be durable yet: the host waits for that (framectl.DB.Durable) before it
// closes the actor. ctx ends at the drain's deadline (Config.DrainDeadline);
// a hook still running then is counted timed out and no longer waited for,
// and the actor closes under it. A hook that returns an error or panics
// fails alone: the other actors drain, and this one is closed and released
// with what it had made durable.
type DrainFunc func(ctx context.Context, a *Actor) error

// drainParallel bounds the drain hooks running at once per namespace: a
// node holding thousands of actors of one namespace would otherwise start
// as many hooks, writes and uploads together, and the ones that matter
// less compete with the lease renewal that keeps every acknowledgement
// valid.
const drainParallel = 32

// whyRefused is the reason of the close of an actor claimed as the drain
// began.
const whyRefused = "claimed as the drain began"

// DrainReport says what a drain did. Its fields are counts and durations,
// for a runtime's logs and metrics.
type DrainReport struct {
	// Namespaces has one entry per namespace that had an open actor
	// during the hooks, in namespace order.
	Namespaces []NamespaceDrain
	// Hooks is how long the hooks took, from the first one's start to the
	// last one's end (or the deadline); Duration the whole drain, the
	// closes and the deregistration included.
	Hooks, Duration time.Duration
}

// NamespaceDrain counts one namespace's open actors by what their drain
// hook did. Each actor counts once.
type NamespaceDrain struct {
	Namespace string
	// Drained: the hook returned nil and what it wrote was durable.
	Drained int
	// Skipped: no hook ran: the namespace has none, or the deadline is 0.
	Skipped int
	// Failed: the hook returned an error or panicked, what it wrote could
	// not be made durable before the deadline for another reason (the node
	// was lost), or the actor's database had stopped already.
	Failed int
	// TimedOut: the hook, or Durable after it, was still running at the
	// deadline, or had not started by then.
	TimedOut int
	// Duration is from the start of the hooks to the end of this
	// namespace's last one (or the deadline).
	Duration time.Duration
}

// StopClaiming makes the host claim no actor from anyone (see "Drain" in
// the package doc): an Acquire that would have to claim the actor from no
// one, a released record or a dead holder fails with ErrDraining, while
// the node keeps renewing its lease, so the actors it holds keep serving
// and being acknowledged and no peer can take them meanwhile. An actor
// whose own.json names this node, though it is not open here, may still
// open. A live holder elsewhere is still a *fence.HeldError, so requests
// are forwarded. Alarms of actors this host does not hold are left to the
// other nodes. It cannot be undone; Drain calls it first.
func (h *Host) StopClaiming() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return
	}
	h.draining = true
	// A node being registered after a loss gets it from watchNode before
	// any claim uses it.
	h.node.StopClaiming()
	h.log.Info("draining: claiming no more actors", logattr.Node, h.node.ID())
}

// Drain hands the node's actors over to its peers: StopClaiming; then
// every open actor of a namespace in Config.Drain gets its hook, at most
// drainParallel (32) at once per namespace, all within Config.DrainDeadline
// (and ctx), and what each hook wrote is made durable; then, as Close,
// every actor is closed (final flush) once its last Handle is released,
// released in own.json (so peers claim it at once with the next epoch),
// and the node deregisters. The actors serve while the hooks run; once
// they end, Acquire fails with ErrStopped.
//
// The error is Close's (ctx bounds all of it). What the hooks did is in
// the report, and logged: one line per namespace, a warning if a hook
// failed or timed out. A hook that failed or timed out loses only what it
// had not made durable: its actor is closed and released like the others.
func (h *Host) Drain(ctx context.Context) (DrainReport, error) {
	start := time.Now()
	h.StopClaiming()
	var report DrainReport
	report.Namespaces, report.Hooks = h.runDrainHooks(ctx)
	h.stats.drainedHooks(report.Namespaces)
	err := h.shutdown(ctx, "drained")
	report.Duration = time.Since(start)
	return report, err
}

// drainJob is one actor's hook, holding a use of the actor.
type drainJob struct {
	a    *Actor
	fn   DrainFunc
	done chan drainOutcome // buffered: a hook cut off at the deadline sends to no one
}

// drainOutcome is how a hook (and Durable after it) ended, and when.
type drainOutcome struct {
	err error
	end time.Time
}

// namespaceTally is a NamespaceDrain being counted.
type namespaceTally struct {
	NamespaceDrain
	firstErr error
}

// runDrainHooks runs the hooks of every open actor, in waves: the actors
// open when a wave starts, then those that opened meanwhile (an actor
// own.json gave this node may still wake), until a wave finds none or the
// deadline passed. The host then stops, in the same critical section, so
// that no actor is handed out that no hook drained.
func (h *Host) runDrainHooks(ctx context.Context) ([]NamespaceDrain, time.Duration) {
	start := time.Now()
	deadline := max(h.cfg.DrainDeadline, 0)
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	tallies := map[string]*namespaceTally{}
	tally := func(ns string) *namespaceTally {
		t := tallies[ns]
		if t == nil {
			t = &namespaceTally{NamespaceDrain: NamespaceDrain{Namespace: ns}}
			tallies[ns] = t
		}
		return t
	}
	slots := map[string]chan struct{}{}
	seen := map[*Actor]struct{}{}
	for {
		h.mu.Lock()
		if h.stopErr != nil {
			// Closed meanwhile, or the node was lost with StopOnNodeLoss:
			// nothing can be made durable any more.
			h.mu.Unlock()
			break
		}
		var wave []*drainJob
		for _, a := range h.actors {
			if _, ok := seen[a]; ok || a.state != Open || a.refused {
				continue
			}
			seen[a] = struct{}{}
			t := tally(a.key.ns)
			fn := h.cfg.Drain[a.key.ns]
			switch {
			case fn == nil || deadline == 0:
				t.Skipped++
			case a.drop:
				t.Failed++ // its database stopped: nothing it writes can be durable
				if t.firstErr == nil {
					t.firstErr = fmt.Errorf("host: draining %s: its database stopped", a)
				}
			case dctx.Err() != nil:
				t.TimedOut++ // opened after the deadline
			default:
				a.refs++ // not hibernated under its hook
				wave = append(wave, &drainJob{a: a, fn: fn, done: make(chan drainOutcome, 1)})
			}
		}
		if len(wave) == 0 {
			h.stopLocked(ErrStopped)
			h.mu.Unlock()
			break
		}
		h.mu.Unlock()
		for _, j := range wave {
			slot := slots[j.a.key.ns]
			if slot == nil {
				slot = make(chan struct{}, drainParallel)
				slots[j.a.key.ns] = slot
			}
			// Not in h.bg: a hook that never returns must not hold Close.
			go h.runDrainHook(dctx, slot, j)
		}
		for _, j := range wave {
			var out drainOutcome
			select {
			case out = <-j.done:
			case <-dctx.Done():
				select {
				case out = <-j.done:
				default:
					out = drainOutcome{fmt.Errorf("host: drain hook of %s still running at the deadline: %w", j.a, dctx.Err()), time.Now()}
				}
			}
			err := out.err
			t := tally(j.a.key.ns)
			switch {
			case err == nil:
				t.Drained++
			case dctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
				t.TimedOut++
			default:
				t.Failed++
			}
			if err != nil {
				h.log.Debug("drain hook", logattr.Namespace, j.a.key.ns, logattr.Actor, frames.ActorKey([]byte(j.a.key.id)), logattr.Err, err)
				if t.firstErr == nil {
					t.firstErr = err
				}
			}
			t.Duration = max(t.Duration, out.end.Sub(start))
			h.releaseUse(j.a, false)
		}
	}
	took := time.Since(start)
	out := make([]NamespaceDrain, 0, len(tallies))
	for _, t := range tallies {
		out = append(out, t.NamespaceDrain)
		level := slog.LevelInfo
		if t.Failed+t.TimedOut > 0 {
			level = slog.LevelWarn
		}
		args := []any{logattr.Namespace, t.Namespace, "drained", t.Drained, "skipped", t.Skipped,
			"failed", t.Failed, "timedOut", t.TimedOut, "ms", t.Duration.Milliseconds()}
		if t.firstErr != nil {
			args = append(args, "firstErr", t.firstErr)
		}
		h.log.Log(context.Background(), level, "drained namespace", args...)
	}
	slices.SortFunc(out, func(x, y NamespaceDrain) int { return strings.Compare(x.Namespace, y.Namespace) })
	return out, took
}

// runDrainHook runs one hook within its namespace's slots, then waits for
// what it wrote to be durable, and sends the outcome.
func (h *Host) runDrainHook(ctx context.Context, slot chan struct{}, j *drainJob) {
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		j.done <- drainOutcome{ctx.Err(), time.Now()}
		return
	}
	err := h.drainActor(ctx, j)
	<-slot
	j.done <- drainOutcome{err, time.Now()}
}

// drainActor runs the hook and Durable. A panic is the hook's failure, not
// the process's: every other actor is still to be drained.
func (h *Host) drainActor(ctx context.Context, j *drainJob) (err error) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("drain hook panicked", logattr.Namespace, j.a.key.ns, logattr.Actor, frames.ActorKey([]byte(j.a.key.id)),
				"panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("host: drain hook of %s panicked: %v", j.a, p)
		}
	}()
	if err := j.fn(ctx, j.a); err != nil {
		return fmt.Errorf("host: drain hook of %s: %w", j.a, err)
	}
	if err := j.a.db.Durable(ctx); err != nil {
		return fmt.Errorf("host: draining %s: %w", j.a, err)
	}
	return nil
}
