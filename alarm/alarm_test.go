package alarm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// The alarm's storage: the row in the actor's database, its generations,
// and the index entry written before it.

// Set writes the entry before the row: while the entry's PUT waits,
// the alarm is not in the database, and when the PUT fails the alarm is
// never written.
func TestAlarmEntryBeforeTheRow(t *testing.T) {
	ctx := t.Context()
	gate := buckettest.NewGate(buckettest.Dir(t), func(key string) bool { return strings.HasPrefix(key, frames.AlarmsPrefix) })
	h := newTestHost(t, gate, Config{}, nil)
	a := h.use(t, "ns", "a")
	gate.Hold()
	setCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := a.s.Set(setCtx, a.pool, alarmAt) // no transaction: the row commits as it is written
		done <- err
	}()
	<-gate.Waiting()
	_, ok, err := a.s.Get(ctx, a.pool)
	require.NoError(t, err)
	require.False(t, ok, "the alarm is in the database before its index entry")
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	gate.Release()
	_, ok, err = a.s.Get(ctx, a.pool)
	require.NoError(t, err)
	require.False(t, ok, "an alarm whose index entry failed was written")
	require.Empty(t, alarmIndex(t, gate, "ns"))
}

// List pages through a namespace's index in due order, starts at a
// due time with AlarmDueAfter, leaves other namespaces out, and names the
// keys under the index that are not alarm entries.
func TestListAlarmsInDueOrder(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			b := be.New(t)
			h := newTestHost(t, b, Config{}, nil)
			// Actor i is due i minutes after alarmAt, set in a shuffled order.
			const n = 7
			order := rand.New(rand.NewPCG(3, 3)).Perm(n)
			for _, i := range order {
				a, err := h.acquire(ctx, Key{"ns", fmt.Sprintf("actor-%d", i)})
				require.NoError(t, err)
				_, err = a.s.Set(ctx, a.pool, alarmAt.Add(time.Duration(i)*time.Minute))
				require.NoError(t, err)
				a.Done()
			}
			o, err := h.acquire(ctx, Key{"other", "actor-0"})
			require.NoError(t, err)
			_, err = o.s.Set(ctx, o.pool, alarmAt)
			require.NoError(t, err)
			o.Done()
			junk := frames.AlarmIndexPrefix(frames.NamespaceID("", "ns")) + "zz/junk"
			_, err = b.Put(ctx, junk, strings.NewReader(""), 0, bucket.Condition{})
			require.NoError(t, err)

			var (
				entries []Entry
				bad     []error
				after   string
			)
			for {
				p, err := h.svc.List(ctx, "ns", after, 2)
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
			p, err := h.svc.List(ctx, "ns", frames.AlarmDueAfter(frames.NamespaceID("", "ns"), uint64(from.UnixMilli())), 0)
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
	h := newTestHost(t, b, Config{}, nil)
	a := h.use(t, "ns", "a")
	o := h.use(t, "ns", "o")
	_, err := a.s.Set(ctx, o.pool, alarmAt)
	require.ErrorIs(t, err, ErrWrongDatabase)
	require.ErrorIs(t, a.s.Delete(ctx, o.pool), ErrWrongDatabase)
	_, _, err = a.s.Get(ctx, o.pool)
	require.ErrorIs(t, err, ErrWrongDatabase)
	require.Empty(t, alarmIndex(t, b, "ns"))
}

// Clear clears only the alarm that ran: one set again meanwhile,
// even for the same time, survives.
func TestClearAlarmKeepsOneSetMeanwhile(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := newTestHost(t, b, Config{}, nil)
	a := h.use(t, "ns", "a")
	ran, err := a.s.Set(ctx, a.pool, alarmAt)
	require.NoError(t, err)
	again, err := a.s.Set(ctx, a.pool, alarmAt)
	require.NoError(t, err)
	cleared, err := a.s.Clear(ctx, a.pool, ran)
	require.NoError(t, err)
	require.False(t, cleared, "cleared an alarm set again since it ran")
	got, ok, err := a.s.Get(ctx, a.pool)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, again.Gen, got.Gen)
	cleared, err = a.s.Clear(ctx, a.pool, got)
	require.NoError(t, err)
	require.True(t, cleared)
	_, ok, err = a.s.Get(ctx, a.pool)
	require.NoError(t, err)
	require.False(t, ok)
	a.Done()
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
			h := newTestHost(t, b, Config{}, nil)
			a := h.use(t, "ns", "a")
			const writers, each = 4, 10
			var wg sync.WaitGroup
			errs := make(chan error, writers*each)
			for w := range writers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 4))
					for range each {
						if rng.IntN(4) == 0 {
							errs <- a.s.Delete(ctx, a.pool)
							continue
						}
						_, err := a.s.Set(ctx, a.pool, alarmAt.Add(time.Duration(rng.IntN(1000))*time.Second))
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, ErrContended) {
					require.NoError(t, err)
				}
			}
			cur, ok, err := a.s.Get(ctx, a.pool)
			require.NoError(t, err)
			a.Done()
			h.closeAll(t)
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
	h := newTestHost(t, gate, Config{}, nil)
	a := h.use(t, "ns", "a")
	_, err := a.s.Set(ctx, a.pool, alarmAt)
	require.NoError(t, err)
	gate.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := a.s.Set(ctx, a.pool, slow) // read gen 1, then waits in its entry's PUT
		done <- err
	}()
	<-gate.Waiting()
	fast, err := a.s.Set(ctx, a.pool, alarmAt.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, uint64(2), fast.Gen)
	gate.Release()
	require.NoError(t, <-done)
	got, ok, err := a.s.Get(ctx, a.pool)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, slow.UnixMilli(), got.Due.UnixMilli())
	assert.Equal(t, uint64(3), got.Gen, "the slow set's generation")
	a.Done()
	h.closeAll(t)
	require.Equal(t, []string{alarmKeyOf("ns", "a", slow, 3)}, alarmIndex(t, gate, "ns"))
}

// Bad input: a time the index cannot order, and a table this package did
// not write.
func TestAlarmBadInput(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := newTestHost(t, b, Config{}, nil)
	a := h.use(t, "ns", "a")
	for _, due := range []time.Time{{}, time.UnixMilli(-1)} {
		_, err := a.s.Set(ctx, a.pool, due)
		require.ErrorIs(t, err, ErrBadTime, "%v", due)
	}
	require.Empty(t, alarmIndex(t, b, "ns"))

	o := h.use(t, "ns", "o")
	_, err := o.pool.ExecContext(ctx, `CREATE TABLE framectl_alarm(id INTEGER PRIMARY KEY, due INTEGER, gen INTEGER);
		INSERT INTO framectl_alarm VALUES(1, -5, 0)`)
	require.NoError(t, err)
	_, _, err = o.s.Get(ctx, o.pool)
	require.ErrorIs(t, err, ErrBadRow)
	_, err = o.s.Set(ctx, o.pool, alarmAt)
	require.ErrorIs(t, err, ErrBadRow)
}
