package host

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// alarmRecord is one run of the tests' alarm handler.
type alarmRecord struct {
	actor      string
	run        alarm.Run
	start, end time.Time
	err        error
}

// alarmRecorder is an alarm handler that records its runs; outcome, if
// set, decides each run's result (nil: success).
type alarmRecorder struct {
	mu      sync.Mutex
	runs    []alarmRecord
	outcome func(ctx context.Context, a *Actor, run alarm.Run) error
}

func (r *alarmRecorder) handler(ctx context.Context, a *Actor, run alarm.Run) error {
	rec := alarmRecord{actor: string(a.ID()), run: run, start: time.Now()}
	var err error
	if r.outcome != nil {
		err = r.outcome(ctx, a, run)
	}
	rec.end, rec.err = time.Now(), err
	r.mu.Lock()
	r.runs = append(r.runs, rec)
	r.mu.Unlock()
	return err
}

func (r *alarmRecorder) list() []alarmRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alarmRecord(nil), r.runs...)
}

// waitRuns waits until the recorder has n runs.
func (r *alarmRecorder) waitRuns(t *testing.T, n int) []alarmRecord {
	t.Helper()
	if !waitFor(func() bool { return len(r.list()) >= n }) {
		t.Fatalf("%d alarm runs, want %d: %+v", len(r.list()), n, r.list())
	}
	return r.list()
}

// Package alarm's figures these tests depend on (its doc gives them).
const (
	maxAlarmRetries = 6                // retries of a failing handler
	alarmSlack      = time.Second      // how overdue an entry is before a scan acts on it
	alarmRelist     = 10 * time.Second // how far back an incremental scan lists
)

// sameAlarm reports whether x and y are one alarm: the same generation,
// due at the same millisecond.
func sameAlarm(x, y alarm.Alarm) bool {
	return x.Gen == y.Gen && x.Due.UnixMilli() == y.Due.UnixMilli()
}

// alarmScanEvery is the in-process tests' scan interval.
const alarmScanEvery = 50 * time.Millisecond

// alarmHost starts a host whose namespace "ns" fires into rec. Its lease
// is longer than the other tests' (a node lost under load runs an alarm
// again, as it must, and a test counting runs would fail for it); a
// failing test says whether the node was lost.
func alarmHost(t *testing.T, b bucket.Bucket, rec *alarmRecorder, cfg Config) *Host {
	t.Helper()
	if cfg.Hooks.Opened == nil {
		cfg.Hooks = (&notesHooks{}).hooks()
	}
	cfg.Alarms = map[string]AlarmFunc{"ns": rec.handler}
	if cfg.AlarmScanEvery == 0 {
		cfg.AlarmScanEvery = alarmScanEvery
	}
	if cfg.Lease == 0 {
		cfg.Lease, cfg.Grace = alarmLease, alarmGrace
	}
	h := newHost(t, b, cfg)
	first := h.Node()
	t.Cleanup(func() {
		if t.Failed() && h.Node() != first {
			t.Logf("the host's node was lost during the test (%v): alarms may have run again", first.Err())
		}
	})
	return h
}

// sameMillis compares times at the alarm's precision.
func sameMillis(x, y time.Time) bool { return x.UnixMilli() == y.UnixMilli() }

// The holder runs an alarm once, at its time, with the alarm it set;
// then the alarm is cleared and its index entry deleted.
func TestAlarmRunsOnceOnItsHolder(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			rec := &alarmRecorder{}
			h := alarmHost(t, b, rec, Config{})
			due := time.Now().Add(300 * time.Millisecond)
			set := durableAlarm(t, h, "ns", "a", due)

			runs := rec.waitRuns(t, 1)
			assert.Equal(t, "a", runs[0].actor)
			assert.True(t, sameAlarm(set, runs[0].run.Alarm), "ran %+v, set %+v", runs[0].run.Alarm, set)
			assert.Equal(t, 0, runs[0].run.Retry)
			assert.False(t, runs[0].start.Before(set.Due), "ran at %v, before its time %v", runs[0].start, set.Due)
			waitIndex(t, b, "ns")
			a, err := h.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			_, ok, err := a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			assert.False(t, ok, "the alarm that ran is still set")
			a.Release()
			time.Sleep(300 * time.Millisecond) // several scans and looks
			assert.Len(t, rec.list(), 1, "runs")
		})
	}
}

// An alarm the handler sets while it runs survives the run: the host
// clears only the alarm that ran, and the index keeps only the new one.
func TestAlarmSetByItsHandlerSurvives(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	next := time.Now().Add(time.Hour)
	rec := &alarmRecorder{outcome: func(ctx context.Context, a *Actor, run alarm.Run) error {
		_, err := a.SetAlarm(ctx, a.Value().(*sql.DB), next)
		return err
	}}
	h := alarmHost(t, b, rec, Config{})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	_, err = a.SetAlarm(ctx, pool(a), time.Now())
	require.NoError(t, err)
	a.Release()
	rec.waitRuns(t, 1)
	waitIndex(t, b, "ns", alarmKeyOf("ns", "a", next, 2))
	a, err = h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	got, ok, err := a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.True(t, ok, "the alarm set by the handler was cleared")
	assert.True(t, sameAlarm(alarm.Alarm{Due: next, Gen: 2}, got), "alarm after the run: %+v", got)
}

// A handler that always fails runs 1 + maxAlarmRetries times, each retry
// after a longer wait than the one before, and then the alarm is given
// up: cleared, its entry deleted.
func TestAlarmRetriesThenGivesUp(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	errAlways := errors.New("failing on purpose")
	rec := &alarmRecorder{outcome: func(context.Context, *Actor, alarm.Run) error { return errAlways }}
	const backoff = 20 * time.Millisecond
	h := alarmHost(t, b, rec, Config{alarmBackoff: backoff})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	_, err = a.SetAlarm(ctx, pool(a), time.Now())
	require.NoError(t, err)
	a.Release()

	runs := rec.waitRuns(t, 1+maxAlarmRetries)
	waitIndex(t, b, "ns")
	time.Sleep(20 * backoff) // past where a seventh retry would run
	runs = rec.list()
	require.Len(t, runs, 1+maxAlarmRetries, "runs")
	for i, r := range runs {
		assert.Equal(t, i, r.run.Retry, "run %d", i)
		require.ErrorIs(t, r.err, errAlways)
		if i > 0 {
			gap := r.start.Sub(runs[i-1].end)
			assert.GreaterOrEqual(t, gap, backoff<<(i-1), "wait before retry %d", i)
		}
	}
	a, err = h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	_, ok, err := a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	assert.False(t, ok, "an alarm given up is still set")
	al := h.Stats().Alarms
	assert.Equal(t, alarm.Stats{Pending: al.Pending, Runs: 1 + maxAlarmRetries, Failures: 1 + maxAlarmRetries, Dropped: 1, FirstRuns: 1, Lateness: al.Lateness, Late: al.Late}, al)
}

// An actor's alarm whose index entry is missing (a restore, a node that
// died between writes) is indexed again when the actor opens.
func TestAlarmReindexedOnOpen(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h1 := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			due := time.Now().Add(time.Hour)
			durableAlarm(t, h1, "ns", "a", due)
			require.NoError(t, h1.Close(ctx))
			key := alarmKeyOf("ns", "a", due, 1)
			require.NoError(t, b.Delete(ctx, key))
			require.Empty(t, alarmIndex(t, b, "ns"))

			h2 := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a, err := h2.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			defer a.Release()
			assert.Equal(t, []string{key}, alarmIndex(t, b, "ns"), "index once the actor is open")
		})
	}
}

// The scan deletes an overdue entry whose actor, held here, no longer
// holds that alarm; the handler does not run for it.
func TestAlarmScanDeletesStaleEntryOfActorHeldHere(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	rec := &alarmRecorder{}
	h := alarmHost(t, b, rec, Config{})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	later := time.Now().Add(time.Hour)
	for range 2 {
		_, err = a.SetAlarm(ctx, pool(a), later)
		require.NoError(t, err)
	}
	require.NoError(t, a.DB().Durable(ctx))
	a.Release()
	current := alarmKeyOf("ns", "a", later, 2)
	waitIndex(t, b, "ns", current)
	// Left by a session that died: generation 1 at another time, overdue
	// (by less than alarmRelist, so that a scan after the write lists
	// it; one due before that is listed by the next full scan).
	stale := alarmKeyOf("ns", "a", time.Now().Add(-alarmRelist/2), 1)
	_, err = b.Put(ctx, stale, bytesReader(nil), 0, bucket.Condition{})
	require.NoError(t, err)
	waitIndex(t, b, "ns", current)
	assert.Empty(t, rec.list(), "runs for a stale entry")
}

// An overdue entry of an actor nobody holds: the scan claims the actor,
// and, since its database holds no alarm, the entry is deleted (here when
// the actor hibernates) and the handler never runs.
func TestAlarmScanClaimsActorNobodyHolds(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h1 := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	a, err := h1.Acquire(ctx, "ns", []byte("b"))
	require.NoError(t, err)
	a.Release()
	require.NoError(t, h1.Close(ctx))
	require.True(t, ownRecord(t, b, "ns", "b").Released())
	stale := alarmKeyOf("ns", "b", time.Now().Add(-time.Minute), 1)
	_, err = b.Put(ctx, stale, bytesReader(nil), 0, bucket.Condition{})
	require.NoError(t, err)

	rec := &alarmRecorder{}
	h2 := alarmHost(t, b, rec, Config{Idle: 200 * time.Millisecond})
	waitIndex(t, b, "ns")
	assert.Empty(t, rec.list(), "runs for a stale entry")
	assert.Equal(t, frames.Epoch(2), ownRecord(t, b, "ns", "b").Epoch, "the scan claimed the actor")
	assert.NoError(t, h2.Err())
}

// An actor that hibernates with an alarm pending is woken by the host at
// the alarm's time (no scans here: only the wake-up can run it).
func TestAlarmWakesHibernatedActor(t *testing.T) {
	b := buckettest.Dir(t)
	rec := &alarmRecorder{}
	h := alarmHost(t, b, rec, Config{Idle: 200 * time.Millisecond, AlarmScanEvery: -1})
	due := time.Now().Add(5 * time.Second)
	set := durableAlarm(t, h, "ns", "a", due)
	require.True(t, waitFor(func() bool { return len(h.Actors()) == 0 }), "the actor never hibernated")
	require.True(t, time.Now().Before(due), "the actor hibernated only after its alarm was due: the test proves nothing")
	require.True(t, ownRecord(t, b, "ns", "a").Released())

	runs := rec.waitRuns(t, 1)
	assert.True(t, sameAlarm(set, runs[0].run.Alarm))
	assert.False(t, runs[0].start.Before(due), "ran at %v, before its time %v", runs[0].start, due)
	waitIndex(t, b, "ns")
}

// A set inside a transaction that commits after the alarm's time: the
// look at its time found the old alarm; the settle after the writer's
// release looks again and runs it (no scans here to catch it).
func TestAlarmSetInTransactionCommittedLate(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	rec := &alarmRecorder{}
	h := alarmHost(t, b, rec, Config{AlarmScanEvery: -1})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	tx, err := pool(a).BeginTx(ctx, nil)
	require.NoError(t, err)
	due := time.Now().Add(100 * time.Millisecond)
	set, err := a.SetAlarm(ctx, tx, due)
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond) // its look finds nothing committed
	require.Empty(t, rec.list(), "ran before the commit")
	require.NoError(t, tx.Commit())
	require.NoError(t, a.DB().Durable(ctx))
	a.Release()
	runs := rec.waitRuns(t, 1)
	assert.True(t, sameAlarm(set, runs[0].run.Alarm))
	waitIndex(t, b, "ns")
}

// After a run, the alarm's index entry stays until the clear is durable:
// while the clear's batch is held back, the entry is there (a node that
// died now would leave the alarm set in the bucket, and its entry must
// lead the next holder to it); once the batch is in, it is deleted.
func TestAlarmEntryKeptUntilTheClearIsDurable(t *testing.T) {
	ctx := t.Context()
	gate := buckettest.NewGate(buckettest.Dir(t), func(key string) bool {
		k, err := frames.ParseKey(key)
		return err == nil && k.Kind == frames.KeyLog
	})
	setDurable := make(chan struct{})
	rec := &alarmRecorder{outcome: func(context.Context, *Actor, alarm.Run) error {
		<-setDurable
		gate.Hold() // the clear's commit is not uploaded
		return nil
	}}
	h := alarmHost(t, gate, rec, Config{})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	set, err := a.SetAlarm(ctx, pool(a), time.Now())
	require.NoError(t, err)
	require.NoError(t, a.DB().Durable(ctx))
	close(setDurable)
	a.Release()
	rec.waitRuns(t, 1)
	<-gate.Waiting()
	_, ok, err := a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.False(t, ok, "the clear has not committed")
	time.Sleep(alarmSlack + 10*alarmScanEvery) // settles and scans, were they not to wait
	assert.Equal(t, []string{alarmKeyOf("ns", "a", set.Due, set.Gen)}, alarmIndex(t, gate, "ns"), "index while the clear is not durable")
	gate.Release()
	waitIndex(t, gate, "ns")
}

// An actor whose open keeps failing, with an overdue alarm entry: the scan
// claims it again only after a wait that doubles (from the scan interval)
// after each failure, not on every scan, each of which would open a new
// session.
func TestAlarmScanBacksOffFailingClaims(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	_, err := b.Put(ctx, alarmKeyOf("ns", "broken", time.Now().Add(-time.Minute), 1), bytesReader(nil), 0, bucket.Condition{})
	require.NoError(t, err)
	errBroken := errors.New("broken on purpose")
	hooks := &notesHooks{onOpened: func(context.Context, *Actor) error { return errBroken }}
	h := alarmHost(t, b, &alarmRecorder{}, Config{Hooks: hooks.hooks()})
	const watch = 30 * alarmScanEvery
	time.Sleep(watch)
	require.NoError(t, h.Close(ctx))
	// Claims at 0, 1, 3, 7, 15 scan intervals (and maybe 31) after the
	// first, and 30 without the back-off.
	opens := hooks.opened.Load()
	assert.GreaterOrEqual(t, opens, int64(1), "the scan never claimed the actor")
	assert.LessOrEqual(t, opens, int64(6), "opens of a broken actor in %v of scans every %v", watch, alarmScanEvery)
}

// A live holder without a handler for the namespace releases (hibernates)
// an actor whose alarm is overdue, and keeps no wake-up for it: a host
// with the handler, whose scans left the entry to that holder while it
// held the actor, reads own.json again within Lease+Grace, claims the
// actor and runs its alarm. (Package alarm's
// TestScanClaimsActorReleasedByLiveHolder counts what each scan does.)
func TestAlarmScanClaimsActorReleasedByLiveHolder(t *testing.T) {
	b := buckettest.Dir(t)
	holder := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Lease: alarmLease, Grace: alarmGrace})
	set := durableAlarm(t, holder, "ns", "x", time.Now().Add(-time.Minute))

	rec := &alarmRecorder{}
	h := alarmHost(t, b, rec, Config{})
	time.Sleep(alarmSlack + 10*alarmScanEvery) // scans that leave the entry to the live holder
	assert.Empty(t, h.Actors(), "actors claimed from a live holder")
	assert.Empty(t, rec.list(), "alarms run while a live holder holds the actor")

	// Idle is negative: as if it had passed, once the settle of the
	// release (which holds a use) is done.
	require.True(t, waitFor(func() bool {
		holder.hibernate(time.Now())
		return len(holder.Actors()) == 0
	}), "the holder did not release the actor")
	require.True(t, ownRecord(t, b, "ns", "x").Released())
	runs := rec.waitRuns(t, 1)
	assert.Equal(t, "x", runs[0].actor)
	assert.True(t, sameAlarm(set, runs[0].run.Alarm), "ran %+v, set %+v", runs[0].run.Alarm, set)
	assert.Equal(t, h.Node().ID(), ownRecord(t, b, "ns", "x").Node, "own.json after the run")
}
