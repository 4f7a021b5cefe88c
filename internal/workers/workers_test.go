package workers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/internal/workers"
)

func TestRunDoesEveryJobWithStatePerWorker(t *testing.T) {
	jobs := make([]int, 1000)
	for i := range jobs {
		jobs[i] = i
	}
	var sum atomic.Int64
	var states atomic.Int64
	err := workers.Run(t.Context(), jobs, 4, func(_ context.Context, seen *int, j int) error {
		if *seen == 0 {
			states.Add(1)
		}
		*seen++
		sum.Add(int64(j))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(999*1000/2), sum.Load())
	require.LessOrEqual(t, states.Load(), int64(4), "one state per worker")
}

func TestRunStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var ran atomic.Int64
	err := workers.Run(t.Context(), make([]struct{}, 10000), 2, func(ctx context.Context, _ *struct{}, _ struct{}) error {
		if ran.Add(1) == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Less(t, ran.Load(), int64(10000), "jobs after the error were not started")
}

func TestRunReportsACancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := workers.Run(ctx, []int{1, 2, 3}, 2, func(context.Context, *int, int) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
}
