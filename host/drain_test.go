package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// openWithNote acquires each actor, writes the note "durable", waits for
// it to be durable and releases the actor: it stays open, idle.
func openWithNote(t *testing.T, h *Host, ns string, ids ...string) {
	t.Helper()
	ctx := t.Context()
	for _, id := range ids {
		a, err := h.Acquire(ctx, ns, []byte(id))
		require.NoError(t, err, "acquiring %s/%s", ns, id)
		require.NoError(t, addNote(ctx, a.Actor, "durable"))
		require.NoError(t, a.DB().Durable(ctx))
		a.Release()
	}
}

// requireHandedOver checks what a finished drain leaves in the bucket:
// each actor released, and the node's lease deleted (deregistered).
func requireHandedOver(t *testing.T, b bucket.Bucket, node, ns string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		rec := ownRecord(t, b, ns, id)
		assert.True(t, rec.Released(), "own.json of %s/%s after the drain: %+v", ns, id, rec)
	}
	_, err := b.Stat(t.Context(), frames.NodeKey(node))
	assert.ErrorIs(t, err, bucket.ErrNotFound, "the drained node's lease")
}

// notesOf opens the actor on h and returns its notes.
func notesOf(t *testing.T, h *Host, ns, id string) ([]string, frames.Epoch) {
	t.Helper()
	ctx := t.Context()
	a, err := h.Acquire(ctx, ns, []byte(id))
	require.NoError(t, err, "acquiring %s/%s", ns, id)
	defer a.Release()
	notes, err := listNotes(ctx, a.Actor)
	require.NoError(t, err)
	return notes, a.Epoch()
}

// drainLines are the "drained namespace" lines a JSON logger wrote.
func drainLines(t *testing.T, logs *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "log line %q", line)
		if rec[slog.MessageKey] == "drained namespace" {
			out = append(out, rec)
		}
	}
	return out
}

// drainOne drains h and returns the report of its one namespace.
func drainOne(t *testing.T, h *Host) NamespaceDrain {
	t.Helper()
	report, err := h.Drain(drainCtx(t))
	require.NoError(t, err)
	require.Len(t, report.Namespaces, 1, "%+v", report)
	return report.Namespaces[0]
}

func drainCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// What a drain hook writes from the runtime's memory is durable before the
// actor is released: the next owner, another host on the bucket, reads
// it, in the next epoch, without waiting for a lease.
func TestDrainHookStateReadByNextOwner(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			var memory sync.Map // actor ID → what the runtime has not written yet
			hook := func(ctx context.Context, a *Actor) error {
				v, ok := memory.Load(string(a.ID()))
				if !ok {
					return errors.New("no state in memory")
				}
				return addNote(ctx, a, v.(string))
			}
			h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook}})
			ids := []string{"a", "b", "c"}
			openWithNote(t, h, "ns", ids...)
			for _, id := range ids {
				memory.Store(id, "in memory "+id)
			}
			node := h.Node().ID()

			got := drainOne(t, h)
			got.Duration = 0
			assert.Equal(t, NamespaceDrain{Namespace: "ns", Drained: 3}, got)
			st := h.Stats()
			assert.True(t, st.Draining)
			assert.Equal(t, DrainStats{Drained: 3}, st.Drain, "what metrics export")
			select {
			case <-h.Done():
			default:
				t.Error("Done not closed after the drain")
			}
			requireHandedOver(t, b, node, "ns", ids...)

			next := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			for _, id := range ids {
				notes, epoch := notesOf(t, next, "ns", id)
				assert.Equal(t, []string{"durable", "in memory " + id}, notes, "%s on the next owner", id)
				assert.Equal(t, frames.Epoch(2), epoch, "%s on the next owner", id)
			}
		})
	}
}

// A hook that never returns, and one that returns when its context ends,
// are cut off at the deadline and counted timed out; the others drain,
// every actor is released and the node deregisters.
func TestDrainCutsOffHooksAtTheDeadline(t *testing.T) {
	b := buckettest.Dir(t)
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	slowErr := make(chan error, 1)
	hook := func(ctx context.Context, a *Actor) error {
		switch string(a.ID()) {
		case "hang":
			<-never // ignores ctx
			return nil
		case "slow":
			<-ctx.Done()
			slowErr <- ctx.Err()
			return ctx.Err()
		}
		return addNote(ctx, a, "drained")
	}
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook},
		DrainDeadline: 300 * time.Millisecond})
	ids := []string{"hang", "slow", "ok"}
	openWithNote(t, h, "ns", ids...)
	node := h.Node().ID()

	got := drainOne(t, h)
	assert.Equal(t, 1, got.Drained, "%+v", got)
	assert.Equal(t, 2, got.TimedOut, "%+v", got)
	assert.Zero(t, got.Failed, "%+v", got)
	assert.Equal(t, DrainStats{Drained: 1, TimedOut: 2}, h.Stats().Drain, "what metrics export")
	require.ErrorIs(t, <-slowErr, context.DeadlineExceeded, "the slow hook's context")
	requireHandedOver(t, b, node, "ns", ids...)

	next := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	notes, _ := notesOf(t, next, "ns", "ok")
	assert.Equal(t, []string{"durable", "drained"}, notes)
	notes, _ = notesOf(t, next, "ns", "hang")
	assert.Equal(t, []string{"durable"}, notes)
}

// Only the namespaces in Config.Drain get a hook; the others' actors are
// counted skipped, and closed and released all the same.
func TestDrainSkipsNamespacesWithoutHook(t *testing.T) {
	b := buckettest.Dir(t)
	var mu sync.Mutex
	var called []string
	hook := func(ctx context.Context, a *Actor) error {
		mu.Lock()
		called = append(called, a.Namespace()+"/"+string(a.ID()))
		mu.Unlock()
		return nil
	}
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook}})
	openWithNote(t, h, "ns", "a")
	openWithNote(t, h, "other", "b", "c")
	node := h.Node().ID()

	report, err := h.Drain(drainCtx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/a"}, called, "hooks called")
	require.Len(t, report.Namespaces, 2, "%+v", report)
	assert.Equal(t, "ns", report.Namespaces[0].Namespace)
	assert.Equal(t, 1, report.Namespaces[0].Drained, "%+v", report.Namespaces[0])
	other := report.Namespaces[1]
	other.Duration = 0
	assert.Equal(t, NamespaceDrain{Namespace: "other", Skipped: 2}, other)
	requireHandedOver(t, b, node, "ns", "a")
	requireHandedOver(t, b, node, "other", "b", "c")
}

// A hook that returns an error, and one that panics, fail alone: the
// others drain, every actor is released, and the namespace's one log line
// is a warning that counts them.
func TestDrainHookFailureIsAlone(t *testing.T) {
	b := buckettest.Dir(t)
	hook := func(ctx context.Context, a *Actor) error {
		switch string(a.ID()) {
		case "fails":
			return errOnPurpose
		case "panics":
			panic("drain hook panicking on purpose")
		}
		return addNote(ctx, a, "drained")
	}
	logs := &syncBuffer{}
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook},
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ids := []string{"ok1", "fails", "panics", "ok2"}
	openWithNote(t, h, "ns", ids...)
	node := h.Node().ID()

	got := drainOne(t, h)
	assert.Equal(t, 2, got.Drained, "%+v", got)
	assert.Equal(t, 2, got.Failed, "%+v", got)
	assert.Zero(t, got.TimedOut, "%+v", got)
	requireHandedOver(t, b, node, "ns", ids...)

	lines := drainLines(t, logs)
	require.Len(t, lines, 1, "drain log lines: %v", lines)
	assert.Equal(t, "WARN", lines[0][slog.LevelKey], "%v", lines[0])
	assert.Equal(t, "ns", lines[0][logattr.Namespace], "%v", lines[0])
	assert.EqualValues(t, 2, lines[0]["drained"], "%v", lines[0])
	assert.EqualValues(t, 2, lines[0]["failed"], "%v", lines[0])
	assert.EqualValues(t, 0, lines[0]["timedOut"], "%v", lines[0])
	assert.Contains(t, lines[0], "firstErr", "%v", lines[0])

	next := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	for _, id := range ids {
		want := []string{"durable"}
		if strings.HasPrefix(id, "ok") {
			want = append(want, "drained")
		}
		notes, _ := notesOf(t, next, "ns", id)
		assert.Equal(t, want, notes, "%s on the next owner", id)
	}
}

// A negative DrainDeadline is a deadline of 0: no hook is called, the
// actors are counted skipped and released at once. Zero is the default,
// and longer deadlines are cut to the maximum.
func TestDrainDeadlineZeroCallsNone(t *testing.T) {
	b := buckettest.Dir(t)
	var calls atomic.Int64
	hook := func(context.Context, *Actor) error { calls.Add(1); return nil }
	logs := &syncBuffer{}
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook},
		DrainDeadline: -1, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	openWithNote(t, h, "ns", "a", "b")
	node := h.Node().ID()

	got := drainOne(t, h)
	assert.Zero(t, calls.Load(), "hooks called")
	assert.Equal(t, NamespaceDrain{Namespace: "ns", Skipped: 2}, got)
	requireHandedOver(t, b, node, "ns", "a", "b")
	lines := drainLines(t, logs)
	require.Len(t, lines, 1, "drain log lines: %v", lines)
	assert.Equal(t, "INFO", lines[0][slog.LevelKey], "%v", lines[0])

	for set, want := range map[time.Duration]time.Duration{0: DefaultDrainDeadline, time.Minute: MaxDrainDeadline, -1: -1, time.Second: time.Second} {
		cfg, err := (Config{Bucket: b, Address: "127.0.0.1:1", Dir: "x", DrainDeadline: set}).withDefaults()
		require.NoError(t, err)
		assert.Equal(t, want, cfg.DrainDeadline, "DrainDeadline %v", set)
	}
}

// At most drainParallel hooks of one namespace run at once: with one
// actor more, the last hook starts only once one of the others ended.
func TestDrainHooksBoundedPerNamespace(t *testing.T) {
	b := buckettest.Dir(t)
	var started atomic.Int64
	let := make(chan struct{})
	hook := func(ctx context.Context, a *Actor) error {
		started.Add(1)
		select {
		case <-let:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook},
		DrainDeadline: MaxDrainDeadline, MaxOpens: 8})
	ids := make([]string, drainParallel+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("a%02d", i)
	}
	openWithNote(t, h, "ns", ids...)
	done := make(chan DrainReport, 1)
	go func() {
		report, err := h.Drain(drainCtx(t))
		assert.NoError(t, err)
		done <- report
	}()
	require.True(t, waitFor(func() bool { return started.Load() >= drainParallel }), "hooks started: %d", started.Load())
	// Generous: an unbounded drain starts the last hook at once.
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, int64(drainParallel), started.Load(), "hooks running at once")
	close(let)
	report := <-done
	assert.Equal(t, int64(drainParallel+1), started.Load(), "hooks called")
	require.Len(t, report.Namespaces, 1, "%+v", report)
	assert.Equal(t, drainParallel+1, report.Namespaces[0].Drained, "%+v", report.Namespaces[0])
}

// A claim in flight when the drain begins (its PUT of own.json held until
// then) fails with ErrDraining rather than hand out an actor no hook will
// drain, and the actor is released at once: a peer claims it without
// waiting for this node's lease.
func TestDrainFailsClaimInFlight(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			own := actorOf("ns", "x").OwnKey()
			gate := buckettest.NewGate(b, func(key string) bool { return key == own })
			var calls atomic.Int64
			hook := func(context.Context, *Actor) error { calls.Add(1); return nil }
			h := newHost(t, gate, Config{Hooks: (&notesHooks{}).hooks(), Drain: map[string]DrainFunc{"ns": hook}})
			gate.Hold()
			acquired := make(chan error, 1)
			go func() {
				a, err := h.Acquire(drainCtx(t), "ns", []byte("x"))
				if err == nil {
					a.Release()
				}
				acquired <- err
			}()
			select {
			case <-gate.Waiting():
			case <-time.After(hangGuard):
				t.Fatal("the claim never reached own.json")
			}
			h.StopClaiming()
			gate.Release()
			err := <-acquired
			require.ErrorIs(t, err, ErrDraining)
			require.True(t, waitFor(func() bool { return ownRecord(t, b, "ns", "x").Released() }),
				"own.json of the refused claim: %+v", ownRecord(t, b, "ns", "x"))

			peer := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a, err := peer.Acquire(drainCtx(t), "ns", []byte("x"))
			require.NoError(t, err)
			assert.Equal(t, frames.Epoch(2), a.Epoch())
			a.Release()

			report, err := h.Drain(drainCtx(t))
			require.NoError(t, err)
			assert.Empty(t, report.Namespaces, "the refused actor was never open")
			assert.Zero(t, calls.Load(), "hooks called")
		})
	}
}

// After StopClaiming the node claims nothing from anyone, but keeps its
// lease: what it holds serves and is acknowledged for longer than a
// lease, no peer can take it, an actor own.json gives it already may
// still open here, a live holder's actor is still forwarded, and a
// request for an actor nobody holds is answered 503 with Retry-After.
func TestStopClaimingKeepsServingOwnActors(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h := startServed(t, b, Config{}, HandlerOptions{})
			peer := startServed(t, b, Config{}, HandlerOptions{})
			openWithNote(t, h.Host, "ns", "mine")
			openWithNote(t, peer.Host, "ns", "theirs")
			// own.json names h's node, but h does not have it open.
			_, err := h.Node().Claim(ctx, actorOf("ns", "owned"), fence.ClaimOptions{})
			require.NoError(t, err)

			h.StopClaiming()
			a, err := h.Acquire(ctx, "ns", []byte("nobody"))
			if err == nil {
				a.Release()
			}
			require.ErrorIs(t, err, ErrDraining, "an actor nobody holds")
			require.ErrorIs(t, err, fence.ErrNotClaiming, "an actor nobody holds")
			_, _, err = fence.ReadRecord(ctx, b, actorOf("ns", "nobody"))
			require.ErrorIs(t, err, bucket.ErrNotFound, "own.json of the actor nobody holds")
			_, err = h.Acquire(ctx, "ns", []byte("theirs"))
			var held *fence.HeldError
			require.ErrorAs(t, err, &held, "the peer's actor")
			assert.Equal(t, peer.Node().ID(), held.Node, "the peer's actor")
			a, err = h.Acquire(ctx, "ns", []byte("owned"))
			require.NoError(t, err, "an actor own.json gives this node")
			assert.Equal(t, frames.Epoch(2), a.Epoch(), "an actor own.json gives this node")
			a.Release()

			r := do(t, http.MethodPost, h.addr, "ns", "nobody", "note", nil)
			assert.Equal(t, http.StatusServiceUnavailable, r.status, "%v", r)
			assert.Equal(t, "1", r.retryAfter, "%v", r)
			r = do(t, http.MethodPost, h.addr, "ns", "theirs", "forwarded", nil)
			assert.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.Equal(t, peer.Node().ID(), r.node, "%v", r)

			// Renewals go on: after more than a lease, h still
			// acknowledges, and the peer is still told h holds its actor.
			lease, _, err := fence.ReadLease(ctx, b, h.Node().ID())
			require.NoError(t, err)
			require.True(t, waitFor(func() bool {
				l, _, err := fence.ReadLease(ctx, b, h.Node().ID())
				return err == nil && time.Duration(l.Heartbeat-lease.Heartbeat)*testLease/3 > testLease
			}), "h's lease is no longer renewed")
			r = do(t, http.MethodPost, h.addr, "ns", "mine", "while draining", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.Equal(t, h.Node().ID(), r.node, "%v", r)
			_, err = peer.Acquire(ctx, "ns", []byte("mine"))
			require.ErrorAs(t, err, &held, "h's actor, from the peer")
			assert.Equal(t, h.Node().ID(), held.Node, "h's actor, from the peer")
			r = do(t, http.MethodGet, peer.addr, "ns", "mine", "", nil)
			require.Equal(t, http.StatusOK, r.status, "%v", r)
			assert.JSONEq(t, `["durable","while draining"]`, r.body)
		})
	}
}

// A draining host whose node is lost registers the next node draining
// too: it claims nothing from anyone either.
func TestDrainingHostRecoversDraining(t *testing.T) {
	ctx := t.Context()
	b := buckettest.NewOutage(buckettest.Dir(t))
	h := newHost(t, b, Config{Lease: recoveryLease, Grace: recoveryGrace, Hooks: (&notesHooks{}).hooks()})
	h.StopClaiming()
	lost := loseNode(t, h, b)
	b.SetDown(false)
	require.True(t, waitFor(func() bool { return h.Node() != lost }), "no node registered after the outage")
	a, err := h.Acquire(ctx, "ns", []byte("nobody"))
	if err == nil {
		a.Release()
	}
	require.ErrorIs(t, err, ErrDraining, "an actor nobody holds, on the next node")
	_, _, err = fence.ReadRecord(ctx, b, actorOf("ns", "nobody"))
	require.ErrorIs(t, err, bucket.ErrNotFound, "own.json of the actor nobody holds")
}
