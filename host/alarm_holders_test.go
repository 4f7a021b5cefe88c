package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
)

// Overdue entries of actors a live node elsewhere holds (and does not
// run: here a bare fence node) cost a scan nothing per entry once they
// were looked at: ten scans of twenty such entries read each own.json
// once and the holder's lease once per scan, not both for every entry on
// every scan (200 and 200 before), and claim nothing.
func TestAlarmScanReadsLiveHoldersOncePerScan(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			const entries, scans = 20, 10
			overdueAtLiveHolder(t, raw, entries)
			cb := buckettest.NewCounting(raw)
			// The default lease: Lease+Grace (15 s) outlasts the scans
			// below many times over, so no own.json is due again.
			rec := &alarmRecorder{}
			h := alarmHost(t, cb, rec, Config{Lease: fence.DefaultLease, Grace: fence.DefaultGrace, AlarmScanEvery: -1})
			holders := newScanHolders()
			before := cb.Counts()
			for range scans {
				require.NoError(t, h.scanAlarms(ctx, "ns", holders))
			}
			got := cb.Counts().Since(before)
			t.Logf("%d scans of %d entries: %s", scans, entries, got)
			assert.Equal(t, int64(entries), got.Get("get", "own"), "own.json reads")
			assert.Equal(t, int64(scans), got.Get("get", "node"), "lease reads")
			assert.Equal(t, int64(scans), got.Get("list", "alarm"), "listings")
			assert.Empty(t, h.Actors(), "actors claimed from a live holder")
			assert.Empty(t, rec.list(), "alarms run")
			assert.Len(t, holders.of("ns").left, entries, "holders remembered")

			// Entries no longer overdue are forgotten by the next full
			// scan.
			for _, k := range alarmIndex(t, raw, "ns") {
				require.NoError(t, raw.Delete(ctx, k))
			}
			h.alarmRescans.Add(1)
			require.NoError(t, h.scanAlarms(ctx, "ns", holders))
			assert.Empty(t, holders.of("ns").left, "holders remembered once the entries are gone")
		})
	}
}

// A backlog of overdue entries left to a live holder is listed a
// thousand at a time after the first page: 250 of them are two listings
// (100, then the rest), not three pages of 100.
func TestAlarmScanListsABacklogInLargePages(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			const entries = 250
			overdueAtLiveHolder(t, raw, entries)
			cb := buckettest.NewCounting(raw)
			h := alarmHost(t, cb, &alarmRecorder{}, Config{Lease: fence.DefaultLease, Grace: fence.DefaultGrace, AlarmScanEvery: -1})
			holders := newScanHolders()
			before := cb.Counts()
			require.NoError(t, h.scanAlarms(ctx, "ns", holders))
			got := cb.Counts().Since(before)
			assert.Equal(t, int64(2), got.Get("list", "alarm"), "listings of one scan: %s", got)
			assert.Len(t, holders.of("ns").left, entries, "entries left to their holder")
		})
	}
}

// What a scan asks the bucket does not grow with the overdue entries left
// to a live holder elsewhere: after the first scan, each of 20 or of 250
// such entries costs one listing (of what came due since) and one read of
// the holder's lease (250 were two listings on every scan before), and
// once Lease+Grace has passed a scan rereads at most alarmRechecksPerScan
// own.json (every one of them before).
func TestAlarmScanCostIndependentOfBacklog(t *testing.T) {
	for _, be := range buckettest.Backends() {
		for _, entries := range []int{20, 250} {
			t.Run(fmt.Sprintf("%s/entries=%d", be.Name, entries), func(t *testing.T) {
				ctx := t.Context()
				raw := be.New(t)
				overdueAtLiveHolderWith(t, raw, entries, fence.Options{Lease: alarmLease, Grace: alarmGrace})
				cb := buckettest.NewCounting(raw)
				rec := &alarmRecorder{}
				h := alarmHost(t, cb, rec, Config{AlarmScanEvery: -1})
				holders := newScanHolders()
				scan := func() buckettest.Counts {
					t.Helper()
					before := cb.Counts()
					require.NoError(t, h.scanAlarms(ctx, "ns", holders))
					got := cb.Counts().Since(before)
					// The host's own lease renewal runs beside the scan
					// and may land inside it; a scan never writes a lease.
					delete(got, buckettest.Req{Op: "put", Kind: "node"})
					return got
				}
				first := scan()
				assert.Equal(t, int64(entries), first.Get("get", "own"), "own.json reads of the first scan: %s", first)
				for i := range 3 {
					got := scan()
					assert.Equal(t, buckettest.Counts{{Op: "list", Kind: "alarm"}: 1, {Op: "get", Kind: "node"}: 1}, got, "requests of scan %d", i+2)
				}
				time.Sleep(alarmLease + alarmGrace + 100*time.Millisecond)
				got := scan()
				assert.LessOrEqual(t, got.Get("get", "own"), int64(alarmRechecksPerScan), "own.json reads once Lease+Grace passed: %s", got)
				assert.Equal(t, int64(1), got.Get("list", "alarm"), "listings once Lease+Grace passed: %s", got)
				assert.Len(t, holders.of("ns").left, entries, "entries left to their holder")
				assert.Empty(t, h.Actors(), "actors claimed from a live holder")
				assert.Empty(t, rec.list(), "alarms run")
			})
		}
	}
}

// A live holder without a handler for the namespace releases (hibernates)
// an actor whose alarm is overdue, and keeps no wake-up for it: a host
// with the handler, whose scan left the entry to that holder while it
// held the actor, reads own.json again within Lease+Grace, claims the
// actor and runs its alarm.
func TestAlarmScanClaimsActorReleasedByLiveHolder(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	holder := newHost(t, b, Config{Hooks: (&notesHooks{}).hooks(), Lease: alarmLease, Grace: alarmGrace})
	a, err := holder.Acquire(ctx, "ns", []byte("x"))
	require.NoError(t, err)
	set, err := a.SetAlarm(ctx, pool(a), time.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.NoError(t, a.DB().Durable(ctx))
	a.Release()

	rec := &alarmRecorder{}
	h := alarmHost(t, b, rec, Config{AlarmScanEvery: -1})
	holders := newScanHolders()
	require.NoError(t, h.scanAlarms(ctx, "ns", holders))
	require.Len(t, holders.of("ns").left, 1, "the scan did not leave the entry to its live holder")
	assert.Empty(t, h.Actors(), "actors claimed from a live holder")

	// Idle is negative: as if it had passed, once the settle of the
	// release (which holds a use) is done.
	require.True(t, waitFor(func() bool {
		holder.hibernate(time.Now())
		return len(holder.Actors()) == 0
	}), "the holder did not release the actor")
	require.True(t, ownRecord(t, b, "ns", "x").Released())
	require.True(t, waitFor(func() bool {
		if err := h.scanAlarms(ctx, "ns", holders); err != nil {
			t.Log(err)
		}
		return len(rec.list()) > 0
	}), "the released actor's alarm never ran")
	runs := rec.waitRuns(t, 1)
	assert.Equal(t, "x", runs[0].actor)
	assert.True(t, sameAlarm(set, runs[0].run.Alarm), "ran %+v, set %+v", runs[0].run.Alarm, set)
	assert.Equal(t, h.Node().ID(), ownRecord(t, b, "ns", "x").Node, "own.json after the run")
}

// overdueAtLiveHolder registers a live node on raw that runs nothing (a
// bare fence node, renewing its lease), has it claim the actors held-0 …
// held-<n-1> of namespace ns, and puts an alarm entry for each that is
// overdue by a minute.
func overdueAtLiveHolder(t *testing.T, raw bucket.Bucket, n int) {
	t.Helper()
	overdueAtLiveHolderWith(t, raw, n, fence.Options{})
}

// overdueAtLiveHolderWith is overdueAtLiveHolder with the live node's
// lease timings.
func overdueAtLiveHolderWith(t *testing.T, raw bucket.Bucket, n int, opts fence.Options) *fence.Node {
	t.Helper()
	ctx := t.Context()
	other, err := fence.Register(ctx, raw, "127.0.0.1:2", opts)
	require.NoError(t, err)
	t.Cleanup(func() { other.Close(context.Background()) })
	for i := range n {
		id := fmt.Sprintf("held-%d", i)
		_, err := other.Claim(ctx, actorOf("ns", id), fence.ClaimOptions{})
		require.NoError(t, err)
		_, err = raw.Put(ctx, alarmKeyOf("ns", id, time.Now().Add(-time.Minute), 1), bytesReader(nil), 0, bucket.Condition{})
		require.NoError(t, err)
	}
	return other
}

// Entries that incremental scans left to a live holder are looked at anew
// once that holder is no longer alive (here its lease is deleted, as a
// node that closes leaves it): the next scan is a full one, which finds
// them all, and once the holder has been gone for Lease+Grace the host
// claims their actors.
func TestAlarmScanClaimsRememberedEntriesOfAGoneHolder(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			const entries = 3
			other := overdueAtLiveHolderWith(t, raw, entries, fence.Options{Lease: alarmLease, Grace: alarmGrace})
			h := alarmHost(t, raw, &alarmRecorder{}, Config{AlarmScanEvery: -1})
			holders := newScanHolders()
			for range 3 {
				require.NoError(t, h.scanAlarms(ctx, "ns", holders))
			}
			require.Len(t, holders.of("ns").left, entries, "entries left to the live holder")
			require.NoError(t, other.Close(ctx))
			// The next scan looks at all of them (a recheck would take
			// Lease+Grace, and alarmRechecksPerScan at a time).
			require.NoError(t, h.scanAlarms(ctx, "ns", holders))
			assert.Empty(t, holders.of("ns").left, "entries left to a holder without a lease")
			assert.Len(t, holders.of("ns").revisit, entries, "entries to look at again until the holder is gone")
			claimed := func() bool {
				for i := range entries {
					if ownRecord(t, raw, "ns", fmt.Sprintf("held-%d", i)).Node != h.Node().ID() {
						return false
					}
				}
				return true
			}
			require.True(t, waitFor(func() bool {
				if err := h.scanAlarms(ctx, "ns", holders); err != nil {
					t.Log(err)
				}
				return claimed()
			}), "the actors of a gone holder were not claimed for their overdue alarms")
		})
	}
}
