package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// An actor with no Handle for Idle is closed and released, and the next
// Acquire, on another node, claims it with the next epoch and everything
// written before.
func TestIdleActorHibernates(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			hooks := &notesHooks{}
			h := newHost(t, b, Config{Idle: 100 * time.Millisecond, Hooks: hooks.hooks()})
			a, err := h.Acquire(ctx, "ns", []byte("x"))
			require.NoError(t, err)
			require.NoError(t, addNote(ctx, a.Actor, "before"))
			require.NoError(t, a.DB().Durable(ctx))
			a.Release()
			if !waitFor(func() bool { return len(h.Actors()) == 0 }) {
				t.Fatalf("the idle actor is still there: %+v", h.Actors())
			}
			assert.True(t, ownRecord(t, b, "ns", "x").Released(), "own.json after hibernation")
			assert.Equal(t, int64(1), hooks.closed.Load(), "Hooks.Closing calls")

			other := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a2, err := other.Acquire(ctx, "ns", []byte("x"))
			require.NoError(t, err)
			defer a2.Release()
			assert.Equal(t, frames.Epoch(2), a2.Epoch())
			notes, err := listNotes(ctx, a2.Actor)
			require.NoError(t, err)
			assert.Equal(t, []string{"before"}, notes)
		})
	}
}

// An actor in use is never hibernated: while one Handle of x is out, y,
// acquired and released after x was opened, hibernates (so the idle time
// has passed for x too), and x stays open and held; released, x
// hibernates as well.
func TestInUseActorIsNotHibernated(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := newHost(t, b, Config{Idle: 50 * time.Millisecond, Hooks: (&notesHooks{}).hooks()})
	x, err := h.Acquire(ctx, "ns", []byte("x"))
	require.NoError(t, err)
	y, err := h.Acquire(ctx, "ns", []byte("y"))
	require.NoError(t, err)
	y.Release()
	// own.json is released inside the close, before y leaves the host.
	if !waitFor(func() bool { return ownRecord(t, b, "ns", "y").Released() && len(h.Actors()) == 1 }) {
		t.Fatalf("y did not hibernate: %v", h.Actors())
	}
	info := h.Actors()
	require.Len(t, info, 1, "actors after y hibernated")
	assert.Equal(t, "x", string(info[0].ID))
	assert.Equal(t, Open, info[0].State)
	assert.Equal(t, 1, info[0].Handles)
	rec := ownRecord(t, b, "ns", "x")
	assert.Equal(t, h.Node().ID(), rec.Node, "own.json of x while in use")
	require.NoError(t, addNote(ctx, x.Actor, "still here"))
	require.NoError(t, x.DB().Durable(ctx))

	x.Release()
	if !waitFor(func() bool { return ownRecord(t, b, "ns", "x").Released() }) {
		t.Fatal("x did not hibernate once released")
	}
}
