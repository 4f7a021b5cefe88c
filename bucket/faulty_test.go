package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/require"
)

// The tests of buckettest.Faulty stay here, beside the contract suite that
// also runs over it (contract_test.go), whose helpers they share.

// counting is a bucket that counts the calls reaching it.
type counting struct {
	bucket.Bucket
	calls atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	c.calls.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *counting) Stat(ctx context.Context, key string) (bucket.Info, error) {
	c.calls.Add(1)
	return c.Bucket.Stat(ctx, key)
}

func (c *counting) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	c.calls.Add(1)
	return c.Bucket.Put(ctx, key, body, size, cond)
}

func (c *counting) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	c.calls.Add(1)
	return c.Bucket.List(ctx, prefix, startAfter, limit)
}

// TestFaultyErrorRate: about the configured share of operations fails with
// ErrInjected, exactly those are counted, and none of them reaches the
// inner bucket.
func TestFaultyErrorRate(t *testing.T) {
	inner := &counting{Bucket: buckettest.Dir(t)}
	put(t, inner, "k", "v")
	inner.calls.Store(0)
	f := buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: 1, ErrorRate: 0.3})
	const n = 2000
	failed := 0
	for range n {
		_, err := f.Stat(t.Context(), "k")
		switch {
		case errors.Is(err, buckettest.ErrInjected):
			failed++
			wantErr(t, err, buckettest.ErrInjected, "stat", "k")
		case err != nil:
			t.Fatal(err)
		}
	}
	c := f.Counts()
	if c.Errors != int64(failed) || c.Calls != n {
		t.Fatalf("counts %+v, observed %d failures of %d", c, failed, n)
	}
	// A fixed seed makes this exact run reproducible; the bounds only say
	// the rate is applied (3 standard deviations are about ±0.03).
	if rate := float64(failed) / n; rate < 0.25 || rate > 0.35 {
		t.Fatalf("failure rate %.3f, configured 0.3", rate)
	}
	if got := inner.calls.Load(); got != int64(n-failed) {
		t.Fatalf("inner bucket saw %d calls, want %d (injected failures must not reach it)", got, n-failed)
	}
}

// TestFaultyErrorRateByOp: per-operation rates override the general one.
func TestFaultyErrorRateByOp(t *testing.T) {
	f := buckettest.NewFaulty(buckettest.Dir(t), buckettest.FaultConfig{
		Seed:          2,
		ErrorRate:     1,
		ErrorRateByOp: map[string]float64{"put": 0, "stat": 0},
	})
	ctx := t.Context()
	for i := range 50 {
		key := fmt.Sprint("k", i)
		_, err := f.Put(ctx, key, strings.NewReader("v"), 1, bucket.Condition{})
		require.NoError(t, err, "put")
		_, err = f.Stat(ctx, key)
		require.NoError(t, err, "stat")
		_, _, err = f.Get(ctx, key)
		require.ErrorIs(t, err, buckettest.ErrInjected, "get")
		_, err = f.List(ctx, "", "", 0)
		require.ErrorIs(t, err, buckettest.ErrInjected, "list")
		require.ErrorIs(t, f.Delete(ctx, key), buckettest.ErrInjected, "delete")
		require.ErrorIs(t, f.DeleteMany(ctx, []string{key, "other"}), buckettest.ErrInjected, "delete many")
	}
	c := f.Counts()
	require.Equal(t, int64(50*4), c.Errors, "counts %+v, want 200 errors", c)
}

// TestFaultyLostResponse: a lost response is an error to the caller, yet
// the put landed.
func TestFaultyLostResponse(t *testing.T) {
	inner := buckettest.Dir(t)
	f := buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: 3, LostResponseRate: 0.5})
	const n = 200
	lost := 0
	for i := range n {
		key, body := fmt.Sprint("k", i), fmt.Sprint("body ", i)
		cond := bucket.Condition{IfAbsent: i%2 == 0}
		_, err := f.Put(t.Context(), key, strings.NewReader(body), int64(len(body)), cond)
		switch {
		case errors.Is(err, buckettest.ErrInjected):
			lost++
		case err != nil:
			t.Fatal(err)
		}
		got, _ := mustGet(t, inner, key)
		require.Equal(t, body, got, "put %d (error %v) did not land", i, err)
	}
	if c := f.Counts(); c.LostResponses != int64(lost) || c.Errors != 0 {
		t.Fatalf("counts %+v, observed %d lost", c, lost)
	}
	if lost < n/3 || lost > 2*n/3 {
		t.Fatalf("%d of %d responses lost, configured half", lost, n)
	}
	// A failed put is not "lost": it never landed.
	f = buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: 3, LostResponseRate: 1})
	_, err := f.Put(t.Context(), "k0", strings.NewReader("x"), 1, bucket.Condition{IfAbsent: true})
	if !errors.Is(err, bucket.ErrPrecondition) || f.Counts().LostResponses != 0 {
		t.Fatalf("conditional put that lost: %v, counts %+v", err, f.Counts())
	}
}

// TestFaultyLatency: every operation is delayed (counted, not timed), and
// a cancelled context ends the wait with the context's error.
func TestFaultyLatency(t *testing.T) {
	inner := &counting{Bucket: buckettest.Dir(t)}
	f := buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: 4, MinLatency: time.Microsecond, MaxLatency: 50 * time.Microsecond})
	for range 20 {
		_, err := f.Stat(t.Context(), "missing")
		require.ErrorIs(t, err, bucket.ErrNotFound)
	}
	c := f.Counts()
	require.Equal(t, int64(20), c.Delays, "counts %+v, want 20 delays", c)
	require.Equal(t, int64(20), c.Calls, "counts %+v, want 20 delays", c)

	slow := buckettest.NewFaulty(inner, buckettest.FaultConfig{MinLatency: time.Hour, MaxLatency: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	inner.calls.Store(0)
	done := make(chan error)
	go func() {
		_, err := slow.Stat(ctx, "k")
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "stat with a cancelled context")
	require.Equal(t, int64(0), inner.calls.Load(), "the cancelled operation reached the inner bucket")
}

// TestFaultyDeterministic: the same seed gives the same faults.
func TestFaultyDeterministic(t *testing.T) {
	inner := buckettest.Dir(t)
	outcomes := func(seed uint64) []bool {
		f := buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: seed, ErrorRate: 0.5})
		var out []bool
		for range 200 {
			_, err := f.Stat(t.Context(), "k")
			out = append(out, errors.Is(err, buckettest.ErrInjected))
		}
		return out
	}
	a, b, c := outcomes(7), outcomes(7), outcomes(8)
	require.Equal(t, b, a, "same seed, different faults")
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same 200 faults")
	}
}

// TestFaultyLag: new keys are missing from listings and deleted ones still
// there until Lag has passed; Get and Stat are never stale; paging never
// sees an empty page with More set.
func TestFaultyLag(t *testing.T) {
	const lag = 10 * time.Second
	clock := buckettest.NewClock(time.Unix(1_000_000, 0))
	inner := buckettest.Dir(t)
	f := buckettest.NewFaulty(inner, buckettest.FaultConfig{Lag: lag, Now: clock.Now})
	listed := func(limit int) []string { return keysOf(listAll(t, f, "", "", limit)) }

	put(t, f, "a", "a")
	put(t, f, "c", "c")
	require.Len(t, listed(0), 0, "new keys listed at once")
	got, _ := mustGet(t, f, "a")
	require.Equal(t, "a", got, "get of a new key")
	clock.Advance(lag)
	require.Equal(t, []string{"a", "c"}, listed(0), "after the lag")

	old, _ := stat(t, f, "c")
	del(t, f, "c")
	put(t, f, "b", "b")
	require.Equal(t, []string{"a", "c"}, listed(0), "right after deleting c and putting b")
	if p := listPage(t, f, "c", "", 0); len(p.Objects) != 1 || p.Objects[0] != old {
		t.Fatalf("deleted key is not listed as it was: %+v, was %+v", p.Objects, old)
	}
	_, err := stat(t, f, "c")
	require.ErrorIs(t, err, bucket.ErrNotFound, "stat of a deleted key")
	clock.Advance(lag)
	require.Equal(t, []string{"a", "b"}, listed(0), "after the lag")
	c := f.Counts()
	if c.Hidden == 0 || c.Ghosts == 0 {
		t.Fatalf("counts %+v: nothing hidden or shown", c)
	}

	// Many fresh keys among old ones: small pages skip over the hidden
	// ones without ever coming back empty with More set (listAll checks).
	for i := range 30 {
		put(t, f, fmt.Sprintf("n/%02d", i), "new")
	}
	clock.Advance(lag)
	for i := range 30 {
		put(t, f, fmt.Sprintf("n/%02d-fresh", i), "fresh")
	}
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("n/%02d", i))
	}
	for _, limit := range []int{1, 2, 7, 0} {
		require.Equal(t, want, keysOf(listAll(t, f, "n/", "", limit)), "limit %d", limit)
	}
	clock.Advance(lag)
	if got := len(listAll(t, f, "n/", "", 3)); got != 60 {
		t.Fatalf("after the lag: %d keys, want 60", got)
	}
}

// TestFaultyConcurrent: counters add up under concurrent use (and the race
// detector has something to look at).
func TestFaultyConcurrent(t *testing.T) {
	f := buckettest.NewFaulty(buckettest.Dir(t), buckettest.FaultConfig{
		Seed: 5, ErrorRate: 0.2, LostResponseRate: 0.2, MaxLatency: 20 * time.Microsecond, Lag: time.Millisecond,
	})
	const workers, ops = 8, 50
	var wg sync.WaitGroup
	var injected atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range ops {
				key := fmt.Sprintf("w%d/%d", w, i%5)
				var err error
				switch i % 3 {
				case 0:
					_, err = f.Put(t.Context(), key, strings.NewReader("x"), 1, bucket.Condition{})
				case 1:
					_, err = f.List(t.Context(), fmt.Sprintf("w%d/", w), "", 2)
				case 2:
					err = f.Delete(t.Context(), key)
				}
				if errors.Is(err, buckettest.ErrInjected) {
					injected.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	c := f.Counts()
	if c.Calls != workers*ops || c.Errors+c.LostResponses != injected.Load() {
		t.Fatalf("counts %+v, observed %d injected of %d calls", c, injected.Load(), workers*ops)
	}
}
