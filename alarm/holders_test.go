package alarm

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
)

// The tests' lease timings of the live holders and of the scanning host:
// Lease+Grace 3 s, as package host's alarm tests have it.
const (
	testLease = 2 * time.Second
	testGrace = time.Second
)

// scanHost starts a test host whose namespace "ns" has a handler that
// counts its runs, and that never scans on its own (the tests call scan):
// its node's lease timings are lease and grace.
func scanHost(t *testing.T, b bucket.Bucket, lease, grace time.Duration) (*testHost, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	h := newTestHost(t, b, Config{Namespaces: []string{"ns"}, ScanEvery: -1, Lease: lease, Grace: grace},
		func(context.Context, *testActor, Run) error { runs.Add(1); return nil })
	return h, &runs
}

// acquires returns the keys the Service acquired so far.
func (h *testHost) acquires() []Key {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Key(nil), h.acquired...)
}

// Overdue entries of actors a live node elsewhere holds (and does not
// run: here a bare fence node) cost a scan nothing per entry once they
// were looked at: ten scans of twenty such entries read each own.json
// once and the holder's lease once per scan, not both for every entry on
// every scan (200 and 200 before), and claim nothing.
func TestScanReadsLiveHoldersOncePerScan(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			const entries, scans = 20, 10
			overdueAtLiveHolder(t, raw, entries, fence.Options{})
			cb := buckettest.NewCounting(raw)
			// The default lease: Lease+Grace (15 s) outlasts the scans
			// below many times over, so no own.json is due again.
			h, runs := scanHost(t, cb, fence.DefaultLease, fence.DefaultGrace)
			holders := newScanHolders()
			before := cb.Counts()
			for range scans {
				require.NoError(t, h.svc.scan(ctx, "ns", holders))
			}
			got := cb.Counts().Since(before)
			t.Logf("%d scans of %d entries: %s", scans, entries, got)
			assert.Equal(t, int64(entries), got.Get("get", "own"), "own.json reads")
			assert.Equal(t, int64(scans), got.Get("get", "node"), "lease reads")
			assert.Equal(t, int64(scans), got.Get("list", "alarm"), "listings")
			assert.Empty(t, h.acquires(), "actors claimed from a live holder")
			assert.Zero(t, runs.Load(), "alarms run")
			assert.Len(t, holders.of("ns").left, entries, "holders remembered")

			// Entries no longer overdue are forgotten by the next full
			// scan.
			for _, k := range alarmIndex(t, raw, "ns") {
				require.NoError(t, raw.Delete(ctx, k))
			}
			h.svc.rescans.Add(1)
			require.NoError(t, h.svc.scan(ctx, "ns", holders))
			assert.Empty(t, holders.of("ns").left, "holders remembered once the entries are gone")
		})
	}
}

// A backlog of overdue entries left to a live holder is listed a
// thousand at a time after the first page: 250 of them are two listings
// (100, then the rest), not three pages of 100.
func TestScanListsABacklogInLargePages(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			const entries = 250
			overdueAtLiveHolder(t, raw, entries, fence.Options{})
			cb := buckettest.NewCounting(raw)
			h, _ := scanHost(t, cb, fence.DefaultLease, fence.DefaultGrace)
			holders := newScanHolders()
			before := cb.Counts()
			require.NoError(t, h.svc.scan(ctx, "ns", holders))
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
// once Lease+Grace has passed a scan rereads at most rechecksPerScan
// own.json (every one of them before).
func TestScanCostIndependentOfBacklog(t *testing.T) {
	for _, be := range buckettest.Backends() {
		for _, entries := range []int{20, 250} {
			t.Run(fmt.Sprintf("%s/entries=%d", be.Name, entries), func(t *testing.T) {
				ctx := t.Context()
				raw := be.New(t)
				overdueAtLiveHolder(t, raw, entries, fence.Options{Lease: testLease, Grace: testGrace})
				cb := buckettest.NewCounting(raw)
				h, runs := scanHost(t, cb, testLease, testGrace)
				holders := newScanHolders()
				scan := func() buckettest.Counts {
					t.Helper()
					before := cb.Counts()
					require.NoError(t, h.svc.scan(ctx, "ns", holders))
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
				time.Sleep(testLease + testGrace + 100*time.Millisecond)
				got := scan()
				assert.LessOrEqual(t, got.Get("get", "own"), int64(rechecksPerScan), "own.json reads once Lease+Grace passed: %s", got)
				assert.Equal(t, int64(1), got.Get("list", "alarm"), "listings once Lease+Grace passed: %s", got)
				assert.Len(t, holders.of("ns").left, entries, "entries left to their holder")
				assert.Empty(t, h.acquires(), "actors claimed from a live holder")
				assert.Zero(t, runs.Load(), "alarms run")
			})
		}
	}
}

// A live holder without a handler for the namespace releases (as it
// hibernates) an actor whose alarm is overdue, and keeps no wake-up for
// it: the scan, which left the entry to that holder while it held the
// actor, reads own.json again within Lease+Grace and claims the actor.
// (Package host's TestAlarmScanClaimsActorReleasedByLiveHolder runs the
// alarm through real hosts.)
func TestScanClaimsActorReleasedByLiveHolder(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	holder, owns := overdueAtLiveHolder(t, b, 1, fence.Options{Lease: testLease, Grace: testGrace})
	h, _ := scanHost(t, b, testLease, testGrace)
	holders := newScanHolders()
	require.NoError(t, h.svc.scan(ctx, "ns", holders))
	require.Len(t, holders.of("ns").left, 1, "the scan did not leave the entry to its live holder")
	assert.Empty(t, h.acquires(), "actors claimed from a live holder")

	require.NoError(t, holder.Release(ctx, owns[0], 0))
	require.True(t, waitFor(func() bool {
		if err := h.svc.scan(ctx, "ns", holders); err != nil {
			t.Log(err)
		}
		// Acquire is recorded before its claim lands and may run
		// beside the scan: wait for own.json itself.
		return ownRecord(t, b, "ns", "held-0").Node == h.node.ID()
	}), "the released actor was never claimed: own.json names %q", ownRecord(t, b, "ns", "held-0").Node)
	assert.Equal(t, []Key{{"ns", "held-0"}}, h.acquires(), "claims")
}

// overdueAtLiveHolder registers a live node on raw that runs nothing (a
// bare fence node, renewing its lease, with opts' timings), has it claim
// the actors held-0 … held-<n-1> of namespace ns, and puts an alarm entry
// for each that is overdue by a minute. It returns the node and its
// claims.
func overdueAtLiveHolder(t *testing.T, raw bucket.Bucket, n int, opts fence.Options) (*fence.Node, []fence.Ownership) {
	t.Helper()
	ctx := t.Context()
	other, err := fence.Register(ctx, raw, "127.0.0.1:2", opts)
	require.NoError(t, err)
	t.Cleanup(func() { other.Close(context.Background()) })
	owns := make([]fence.Ownership, n)
	for i := range n {
		id := fmt.Sprintf("held-%d", i)
		owns[i], err = other.Claim(ctx, actorOf("ns", id), fence.ClaimOptions{})
		require.NoError(t, err)
		_, err = raw.Put(ctx, alarmKeyOf("ns", id, time.Now().Add(-time.Minute), 1), bytes.NewReader(nil), 0, bucket.Condition{})
		require.NoError(t, err)
	}
	return other, owns
}

// Entries that incremental scans left to a live holder are looked at anew
// once that holder is no longer alive (here its lease is deleted, as a
// node that closes leaves it): the next scan is a full one, which finds
// them all, and once the holder has been gone for Lease+Grace the host
// claims their actors.
func TestScanClaimsRememberedEntriesOfAGoneHolder(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			const entries = 3
			other, _ := overdueAtLiveHolder(t, raw, entries, fence.Options{Lease: testLease, Grace: testGrace})
			h, _ := scanHost(t, raw, testLease, testGrace)
			holders := newScanHolders()
			for range 3 {
				require.NoError(t, h.svc.scan(ctx, "ns", holders))
			}
			require.Len(t, holders.of("ns").left, entries, "entries left to the live holder")
			require.NoError(t, other.Close(ctx))
			// The next scan looks at all of them (a recheck would take
			// Lease+Grace, and rechecksPerScan at a time).
			require.NoError(t, h.svc.scan(ctx, "ns", holders))
			assert.Empty(t, holders.of("ns").left, "entries left to a holder without a lease")
			assert.Len(t, holders.of("ns").revisit, entries, "entries to look at again until the holder is gone")
			claimed := func() bool {
				for i := range entries {
					if ownRecord(t, raw, "ns", fmt.Sprintf("held-%d", i)).Node != h.node.ID() {
						return false
					}
				}
				return true
			}
			require.True(t, waitFor(func() bool {
				if err := h.svc.scan(ctx, "ns", holders); err != nil {
					t.Log(err)
				}
				return claimed()
			}), "the actors of a gone holder were not claimed for their overdue alarms")
		})
	}
}

func ownRecord(t testing.TB, b bucket.Bucket, ns, id string) fence.Record {
	t.Helper()
	rec, _, err := fence.ReadRecord(t.Context(), b, actorOf(ns, id))
	require.NoError(t, err)
	return rec
}
