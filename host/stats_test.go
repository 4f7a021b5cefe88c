package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// isLogKey matches the keys of batches.
func isLogKey(key string) bool {
	k, err := frames.ParseKey(key)
	return err == nil && k.Kind == frames.KeyLog
}

// Stats counts the actors by state and sums the replication of those
// open: a commit held at the gate is lag and pending bytes, and neither is
// left once it is durable.
func TestStatsActorsAndReplication(t *testing.T) {
	ctx := t.Context()
	g := buckettest.NewGate(buckettest.Dir(t), isLogKey)
	t.Cleanup(g.Release) // before the host's Close
	h := newHost(t, g, Config{Hooks: (&notesHooks{}).hooks()})
	st := h.Stats()
	assert.Zero(t, st.Open+st.Queued+st.Opening+st.Closing, "actors of a new host")
	assert.Zero(t, st.Replication.Actors)

	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	b, err := h.Acquire(ctx, "ns", []byte("b"))
	require.NoError(t, err)
	defer b.Release()
	// Hooks.Opened's schema is a commit of each: durable before the gate
	// holds uploads.
	require.NoError(t, a.DB().Durable(ctx))
	require.NoError(t, b.DB().Durable(ctx))
	g.Hold()
	require.NoError(t, addNote(ctx, a.Actor, "held at the gate"))
	<-g.Waiting()

	st = h.Stats()
	assert.Equal(t, 2, st.Open, "open actors")
	assert.Equal(t, Claims{OK: 2}, st.Claims)
	r := st.Replication
	assert.Equal(t, 2, r.Actors, "databases summed")
	assert.Equal(t, 1, r.Lagging, "lagging databases")
	assert.Positive(t, r.MaxLag)
	assert.Equal(t, r.MaxLag, r.TotalLag, "one database lags")
	assert.Positive(t, r.Pending)
	assert.Equal(t, a.DB().Stats().Pending, r.Pending)
	assert.Equal(t, r.Pending, r.MaxPending)
	assert.Zero(t, r.UploadsFailing+r.Stopped)

	g.Release()
	require.NoError(t, a.DB().Durable(ctx))
	r = h.Stats().Replication
	assert.Zero(t, r.Lagging, "lagging once durable")
	assert.Zero(t, r.Pending, "pending once durable")
	assert.Zero(t, r.MaxLag)

	// A database that stopped is counted, and its actor is dropped (closed
	// once released) as fenced.
	b.DB().Fence()
	assert.Equal(t, 1, h.Stats().Replication.Stopped, "stopped databases")
	b.Release()
	if !waitFor(func() bool { st = h.Stats(); return st.Open == 1 && st.ActorsFenced == 1 }) {
		t.Fatalf("after a fence: %+v", st)
	}
	assert.Zero(t, st.ActorsStopped)
}

// A live node elsewhere holds the actor: the claim is counted held.
func TestStatsClaimHeld(t *testing.T) {
	b := buckettest.Dir(t)
	c := startChild(t, b, t.TempDir(), "x")
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	_, err := h.Acquire(t.Context(), "ns", []byte("x"))
	var held *fence.HeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, c.node, held.Node)
	assert.Equal(t, Claims{Held: 1}, h.Stats().Claims)
}

// The alarms' counts: one alarm in the future is pending; one an hour
// overdue runs at once, late, fails, and succeeds on its retry.
func TestStatsAlarms(t *testing.T) {
	errFirst := errors.New("failing the first run on purpose")
	rec := &alarmRecorder{outcome: func(_ context.Context, _ *Actor, run alarm.Run) error {
		if run.Retry == 0 {
			return errFirst
		}
		return nil
	}}
	h := alarmHost(t, buckettest.Dir(t), rec, Config{alarmBackoff: 20 * time.Millisecond})

	durableAlarm(t, h, "ns", "later", time.Now().Add(time.Hour))
	var st Stats
	if !waitFor(func() bool { st = h.Stats(); return st.Alarms.Pending == 1 }) {
		t.Fatalf("an alarm an hour ahead: %+v", st.Alarms)
	}
	assert.Zero(t, st.Alarms.Runs)

	const overdue = time.Hour
	durableAlarm(t, h, "ns", "a", time.Now().Add(-overdue))
	rec.waitRuns(t, 2)
	if !waitFor(func() bool { st = h.Stats(); return st.Alarms.Runs == 2 && st.Alarms.Pending == 1 }) {
		t.Fatalf("after a run and its retry: %+v", st.Alarms)
	}
	al := st.Alarms
	assert.Equal(t, int64(1), al.Failures, "failures")
	assert.Zero(t, al.Dropped, "dropped")
	assert.Equal(t, int64(1), al.FirstRuns, "first runs")
	assert.Equal(t, int64(1), al.Late, "late first runs")
	assert.GreaterOrEqual(t, al.Lateness, overdue, "lateness")
}
