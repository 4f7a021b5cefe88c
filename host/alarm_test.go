package host

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// waitIndex waits until the namespace's alarm index is want (the host
// settles it in the background after a Handle is released).
func waitIndex(t testing.TB, b bucket.Bucket, ns string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	var got []string
	if !waitFor(func() bool {
		got = alarmIndex(t, b, ns)
		if got == nil {
			got = []string{}
		}
		return slices.Equal(got, want)
	}) {
		t.Fatalf("alarm index of %s: %q, want %q", ns, got, want)
	}
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
			assert.Equal(t, Alarm{Due: alarmAt, Gen: 1}, set)
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
			assert.Equal(t, Alarm{Due: alarmAt, Gen: 1}, Alarm{Due: time.UnixMilli(got.Due.UnixMilli()), Gen: got.Gen}, "after the rollback")
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
			a, err := h1.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			set, err := a.SetAlarm(ctx, pool(a), alarmAt)
			require.NoError(t, err)
			require.NoError(t, a.DB().Durable(ctx))
			a.Release()
			require.NoError(t, h1.Close(ctx))

			h2 := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a, err = h2.Acquire(ctx, "ns", []byte("a"))
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

// SetAlarm writes the entry before the row: while the entry's PUT waits,
// the alarm is not in the database, and when the PUT fails the alarm is
// never written.
func TestAlarmEntryBeforeTheRow(t *testing.T) {
	ctx := t.Context()
	gate := buckettest.NewGate(buckettest.Dir(t), func(key string) bool { return strings.HasPrefix(key, frames.AlarmsPrefix) })
	h := newHost(t, gate, Config{Hooks: (&notesHooks{}).hooks()})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	gate.Hold()
	setCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := a.SetAlarm(setCtx, pool(a), alarmAt) // no transaction: the row commits as it is written
		done <- err
	}()
	<-gate.Waiting()
	_, ok, err := a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.False(t, ok, "the alarm is in the database before its index entry")
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	gate.Release()
	_, ok, err = a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.False(t, ok, "an alarm whose index entry failed was written")
	require.Empty(t, alarmIndex(t, gate, "ns"))
}

// ListAlarms pages through a namespace's index in due order, starts at a
// due time with AlarmDueAfter, leaves other namespaces out, and names the
// keys under the index that are not alarm entries.
func TestListAlarmsInDueOrder(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			// Actor i is due i minutes after alarmAt, set in a shuffled order.
			const n = 7
			order := rand.New(rand.NewPCG(3, 3)).Perm(n)
			for _, i := range order {
				a, err := h.Acquire(ctx, "ns", fmt.Appendf(nil, "actor-%d", i))
				require.NoError(t, err)
				_, err = a.SetAlarm(ctx, pool(a), alarmAt.Add(time.Duration(i)*time.Minute))
				require.NoError(t, err)
				a.Release()
			}
			o, err := h.Acquire(ctx, "other", []byte("actor-0"))
			require.NoError(t, err)
			_, err = o.SetAlarm(ctx, pool(o), alarmAt)
			require.NoError(t, err)
			o.Release()
			junk := frames.AlarmIndexPrefix(frames.NamespaceID("", "ns")) + "zz/junk"
			_, err = b.Put(ctx, junk, strings.NewReader(""), 0, bucket.Condition{})
			require.NoError(t, err)

			var (
				entries []AlarmEntry
				bad     []error
				after   string
			)
			for {
				p, err := h.ListAlarms(ctx, "ns", after, 2)
				require.NoError(t, err)
				entries = append(entries, p.Entries...)
				bad = append(bad, p.Bad...)
				if !p.More {
					break
				}
				after = p.Last
			}
			require.Len(t, entries, n)
			for i, e := range entries {
				assert.Equal(t, fmt.Sprintf("actor-%d", i), string(e.Actor), "entry %d", i)
				assert.Equal(t, alarmAt.Add(time.Duration(i)*time.Minute).UnixMilli(), e.Due.UnixMilli(), "entry %d", i)
				assert.Equal(t, uint64(1), e.Gen)
				assert.Equal(t, alarmKeyOf("ns", string(e.Actor), e.Due, 1), e.Key)
			}
			require.Len(t, bad, 1)
			require.ErrorIs(t, bad[0], frames.ErrInvalid)
			var fe *frames.Error
			require.ErrorAs(t, bad[0], &fe)
			assert.Contains(t, fe.Key, junk)

			from := alarmAt.Add(4 * time.Minute)
			p, err := h.ListAlarms(ctx, "ns", frames.AlarmDueAfter(frames.NamespaceID("", "ns"), uint64(from.UnixMilli())), 0)
			require.NoError(t, err)
			require.Len(t, p.Entries, n-4)
			assert.Equal(t, "actor-4", string(p.Entries[0].Actor))
		})
	}
}

// An alarm operation given another actor's connection refuses, and
// writes no index entry.
func TestAlarmOnAnotherActorsDatabase(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	o, err := h.Acquire(ctx, "ns", []byte("o"))
	require.NoError(t, err)
	defer o.Release()
	_, err = a.SetAlarm(ctx, pool(o), alarmAt)
	require.ErrorIs(t, err, ErrWrongDatabase)
	require.ErrorIs(t, a.DeleteAlarm(ctx, pool(o)), ErrWrongDatabase)
	_, _, err = a.Alarm(ctx, pool(o))
	require.ErrorIs(t, err, ErrWrongDatabase)
	require.Empty(t, alarmIndex(t, b, "ns"))
}

// ClearAlarm clears only the alarm that ran: one set again meanwhile,
// even for the same time, survives.
func TestClearAlarmKeepsOneSetMeanwhile(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release() // on failure; Release counts once
	ran, err := a.SetAlarm(ctx, pool(a), alarmAt)
	require.NoError(t, err)
	again, err := a.SetAlarm(ctx, pool(a), alarmAt)
	require.NoError(t, err)
	cleared, err := a.ClearAlarm(ctx, pool(a), ran)
	require.NoError(t, err)
	require.False(t, cleared, "cleared an alarm set again since it ran")
	got, ok, err := a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, again.Gen, got.Gen)
	cleared, err = a.ClearAlarm(ctx, pool(a), got)
	require.NoError(t, err)
	require.True(t, cleared)
	_, ok, err = a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, a.DB().Durable(ctx))
	a.Release()
	waitIndex(t, b, "ns")
}

// Concurrent sets and deletes outside transactions, from several
// connections: every one either lands or fails, and once the actor
// closes the index holds exactly the entry of the alarm that committed.
func TestConcurrentAlarmWrites(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
			a, err := h.Acquire(ctx, "ns", []byte("a"))
			require.NoError(t, err)
			defer a.Release() // on failure; Release counts once
			const writers, each = 4, 10
			var wg sync.WaitGroup
			errs := make(chan error, writers*each)
			for w := range writers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 4))
					for range each {
						if rng.IntN(4) == 0 {
							errs <- a.DeleteAlarm(ctx, pool(a))
							continue
						}
						_, err := a.SetAlarm(ctx, pool(a), alarmAt.Add(time.Duration(rng.IntN(1000))*time.Second))
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, ErrAlarmContended) {
					require.NoError(t, err)
				}
			}
			cur, ok, err := a.Alarm(ctx, pool(a))
			require.NoError(t, err)
			require.NoError(t, a.DB().Durable(ctx))
			a.Release()
			require.NoError(t, h.Close(ctx))
			if ok {
				require.Equal(t, []string{alarmKeyOf("ns", "a", cur.Due, cur.Gen)}, alarmIndex(t, b, "ns"))
			} else {
				require.Empty(t, alarmIndex(t, b, "ns"))
			}
		})
	}
}

// A set that read the alarm before another set committed does not commit
// the same generation over it: it reads again and takes the next one, so
// the generations a database commits are 1, 2, 3.
func TestAlarmSetsNeverShareAGeneration(t *testing.T) {
	ctx := t.Context()
	slow := alarmAt.Add(time.Hour)
	gate := buckettest.NewGate(buckettest.Dir(t), func(key string) bool {
		k, err := frames.ParseKey(key)
		return err == nil && k.Kind == frames.KeyAlarm && k.Due == uint64(slow.UnixMilli())
	})
	h := newHost(t, gate, Config{Hooks: (&notesHooks{}).hooks()})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release() // on failure; Release counts once
	_, err = a.SetAlarm(ctx, pool(a), alarmAt)
	require.NoError(t, err)
	gate.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := a.SetAlarm(ctx, pool(a), slow) // read gen 1, then waits in its entry's PUT
		done <- err
	}()
	<-gate.Waiting()
	fast, err := a.SetAlarm(ctx, pool(a), alarmAt.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, uint64(2), fast.Gen)
	gate.Release()
	require.NoError(t, <-done)
	got, ok, err := a.Alarm(ctx, pool(a))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, slow.UnixMilli(), got.Due.UnixMilli())
	assert.Equal(t, uint64(3), got.Gen, "the slow set's generation")
	require.NoError(t, a.DB().Durable(ctx))
	a.Release()
	require.NoError(t, h.Close(ctx))
	require.Equal(t, []string{alarmKeyOf("ns", "a", slow, 3)}, alarmIndex(t, gate, "ns"))
}

// Bad input: a time the index cannot order, and a table the host did not
// write.
func TestAlarmBadInput(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks()})
	a, err := h.Acquire(ctx, "ns", []byte("a"))
	require.NoError(t, err)
	defer a.Release()
	for _, due := range []time.Time{{}, time.UnixMilli(-1)} {
		_, err := a.SetAlarm(ctx, pool(a), due)
		require.ErrorIs(t, err, ErrBadAlarmTime, "%v", due)
	}
	require.Empty(t, alarmIndex(t, b, "ns"))

	o, err := h.Acquire(ctx, "ns", []byte("o"))
	require.NoError(t, err)
	defer o.Release()
	_, err = pool(o).ExecContext(ctx, `CREATE TABLE framectl_alarm(id INTEGER PRIMARY KEY, due INTEGER, gen INTEGER);
		INSERT INTO framectl_alarm VALUES(1, -5, 0)`)
	require.NoError(t, err)
	_, _, err = o.Alarm(ctx, pool(o))
	require.ErrorIs(t, err, ErrBadAlarmRow)
	_, err = o.SetAlarm(ctx, pool(o), alarmAt)
	require.ErrorIs(t, err, ErrBadAlarmRow)
}
