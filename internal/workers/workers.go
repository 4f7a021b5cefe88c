// Package workers owns running a list of jobs on a bounded number of
// goroutines, the shape every fan-out over objects known in advance
// shares (chunk uploads, loads and verification; verify's decoding of
// objects and the actors of a namespace in package restore; compaction's
// manifest reads and chunk deletes; ls's header reads; the benchmark's
// downloads): each worker keeps its own state (its buffers) from job to
// job, and the first error cancels the jobs not yet started. It never
// retries a job and never orders results: callers record them by job.
package workers

import (
	"context"
	"sync"
)

// Run calls do for every job on n goroutines (at least one), each with a
// state of its own that starts as S's zero value. It returns the first
// error do returned; else ctx's error if ctx ended before every job ran;
// else nil. The context do receives is cancelled at the first error.
func Run[J, S any](ctx context.Context, jobs []J, n int, do func(ctx context.Context, state *S, job J) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	work := make(chan J)
	for range max(1, n) {
		wg.Go(func() {
			var state S
			for j := range work {
				if err := do(ctx, &state, j); err != nil {
					once.Do(func() { first = err })
					cancel()
				}
			}
		})
	}
feed:
	for _, j := range jobs {
		select {
		case work <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
