package host

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/session"
)

// alarmAt is a due time of the tests, at millisecond precision.
var alarmAt = time.UnixMilli(1_900_000_000_000)

// alarmIndex lists a namespace's alarm index.
func alarmIndex(t testing.TB, b bucket.Bucket, ns string) []string {
	t.Helper()
	return buckettest.Keys(t, b, frames.AlarmIndexPrefix(frames.NamespaceID("", ns)))
}

// alarmKeyOf is the index key of an actor's alarm.
func alarmKeyOf(ns, id string, due time.Time, gen uint64) string {
	return actorOf(ns, id).AlarmKey(uint64(due.UnixMilli()), gen)
}

func pool(a *Handle) *sql.DB { return a.Value().(*sql.DB) }

// durableAlarm acquires the actor ns/id on h, sets its alarm to due,
// waits until that is durable, releases the actor, and returns the alarm
// set.
func durableAlarm(t *testing.T, h *Host, ns, id string, due time.Time) alarm.Alarm {
	t.Helper()
	ctx := t.Context()
	a, err := h.Acquire(ctx, ns, []byte(id))
	require.NoError(t, err)
	defer a.Release()
	set, err := a.SetAlarm(ctx, pool(a), due)
	require.NoError(t, err)
	require.NoError(t, a.DB().Durable(ctx))
	return set
}

// waitIndex waits until the namespace's alarm index is want (the host
// settles it in the background after a Handle is released).
func waitIndex(t testing.TB, b bucket.Bucket, ns string, want ...string) {
	t.Helper()
	buckettest.WaitKeys(t, b, frames.AlarmIndexPrefix(frames.NamespaceID("", ns)), want...)
}

// SetAlarm in a transaction: its entry is in the bucket before the
// transaction commits; the alarm commits with the transaction's other
// writes, or rolls back with them; a rolled-back set's entry is deleted
// when the actor closes, and the committed alarm's entry stays.
func TestAlarmCommitsWithTheTransaction(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			hooks := &notesHooks{}
			h := newHost(t, b, Config{Hooks: hooks.hooks()})
			a, err := h.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			defer a.Release() // on failure; Release counts once

			tx, err := pool(a).BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, `INSERT INTO notes(body) VALUES('with the alarm')`)
			require.NoError(t, err)
			set, err := a.SetAlarm(ctx, tx, alarmAt)
			require.NoError(t, err)
			assert.Equal(t, alarm.Alarm{Due: alarmAt, Gen: 1}, set)
			require.Equal(t, []string{alarmKeyOf("ns", "a", alarmAt, 1)}, alarmIndex(t, b, "ns"), "index before the commit")
			_, ok, err := a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.False(t, ok, "another connection sees the alarm before the commit")
			require.NoError(t, tx.Commit())
			require.NoError(t, a.DB().Durable(ctx))
			got, ok, err := a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, alarmAt.UnixMilli(), got.Due.UnixMilli())
			assert.Equal(t, uint64(1), got.Gen)

			later := alarmAt.Add(time.Hour)
			tx, err = pool(a).BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, `INSERT INTO notes(body) VALUES('rolled back')`)
			require.NoError(t, err)
			_, err = a.SetAlarm(ctx, tx, later)
			require.NoError(t, err)
			require.NoError(t, tx.Rollback())
			got, ok, err = a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, alarm.Alarm{Due: alarmAt, Gen: 1}, alarm.Alarm{Due: time.UnixMilli(got.Due.UnixMilli()), Gen: got.Gen}, "after the rollback")
			notes, err := listNotes(ctx, a.Actor)
			require.NoError(t, err)
			assert.Equal(t, []string{"with the alarm"}, notes)

			// The rolled-back set's entry may belong to a set still in
			// flight as far as a settle can tell: it stays until the
			// actor closes.
			a.Release()
			waitIndex(t, b, "ns", alarmKeyOf("ns", "a", alarmAt, 1), alarmKeyOf("ns", "a", later, 2))
			require.NoError(t, h.Close(ctx))
			require.Equal(t, []string{alarmKeyOf("ns", "a", alarmAt, 1)}, alarmIndex(t, b, "ns"), "index after close")
		})
	}
}

// An alarm moved several times, then deleted: once the writer released
// the actor, only the current alarm's entry is left, then none.
func TestAlarmMovedThenDeleted(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a, err := h.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			for i := range 3 {
				_, err := a.SetAlarm(ctx, pool(a), alarmAt.Add(time.Duration(i)*time.Minute))
				require.NoError(t, err)
			}
			require.NoError(t, a.DB().Durable(ctx))
			a.Release()
			last := alarmAt.Add(2 * time.Minute)
			waitIndex(t, b, "ns", alarmKeyOf("ns", "a", last, 3))

			a, err = h.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			got, ok, err := a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, last.UnixMilli(), got.Due.UnixMilli())
			assert.Equal(t, uint64(3), got.Gen)
			require.NoError(t, a.DeleteAlarm(ctx, pool(a)))
			require.NoError(t, a.DeleteAlarm(ctx, pool(a)), "deleting no alarm")
			require.NoError(t, a.DB().Durable(ctx))
			a.Release()
			waitIndex(t, b, "ns")
			a, err = h.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			defer a.Release()
			_, ok, err = a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.False(t, ok)
		})
	}
}

// The alarm is in the actor's database: the next owner, on another node
// with an empty data directory, restores it from the bucket, and its
// entry is still indexed.
func TestAlarmRestoredByTheNextOwner(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h1 := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			set := durableAlarm(t, h1, "ns", "a", alarmAt)
			require.NoError(t, h1.Close(ctx))

			h2 := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a, err := h2.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			defer a.Release()
			require.Equal(t, frames.Epoch(2), a.Epoch())
			require.Equal(t, session.StartRestored, a.DB().Stats().Start.From, "the next owner restored from the bucket")
			got, ok, err := a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, set.Due.UnixMilli(), got.Due.UnixMilli())
			assert.Equal(t, set.Gen, got.Gen)
			assert.Equal(t, []string{alarmKeyOf("ns", "a", alarmAt, 1)}, alarmIndex(t, b, "ns"))
		})
	}
}
