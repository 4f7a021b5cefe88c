package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/session"
)

// durable: commits/s when every commit is acknowledged (Durable after each
// commit in async mode; each commit itself in sync mode), 1 and 16 writers.
func durable(ctx context.Context, url string, seconds float64) error {
	if url == "" {
		return errors.New("durable needs -bucket (an S3 URL; scripts/with-s3.sh sets FRAMECTL_TEST_S3)")
	}
	b, cleanup, err := openBucket(ctx, url)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("durable throughput against %s, %g s per variant; commits per batch is session.Stats' Commits over Batches (a batch is one PUT unless retried)\n", b, seconds)
	fmt.Println("| variant | writers | commits/s | PUTs | commits per batch |")
	fmt.Println("|---|---|---|---|---|")
	results := map[string]float64{}
	for _, mode := range []session.Mode{session.Async, session.Sync} {
		for _, writers := range []int{1, 16} {
			rate, st, err := durableRun(ctx, b, mode, writers, seconds)
			if err != nil {
				return err
			}
			name := "async + Durable each"
			if mode == session.Sync {
				name = "sync"
			}
			results[fmt.Sprint(mode, writers)] = rate
			fmt.Printf("| %s | %d | %s | %s | %.1f |\n", name, writers, thousands(rate), thousands(float64(st.PUTs)), float64(st.Commits)/float64(max(st.Batches, 1)))
		}
	}
	fmt.Printf("\n16 writers: commits/s of async + Durable each ÷ commits/s of sync = %.1f×\n", results[fmt.Sprint(session.Async, 16)]/results[fmt.Sprint(session.Sync, 16)])
	return nil
}

func durableRun(ctx context.Context, b interface{ String() string }, mode session.Mode, writers int, seconds float64) (float64, session.Stats, error) {
	dir, cleanup, err := workDir()
	if err != nil {
		return 0, session.Stats{}, err
	}
	defer cleanup()
	bk, _, err := openBucket(ctx, b.String())
	if err != nil {
		return 0, session.Stats{}, err
	}
	db, err := replicated(ctx, bk, dir, mode)
	if err != nil {
		return 0, session.Stats{}, err
	}
	defer db.Close(ctx)
	setup, err := db.Conn()
	if err != nil {
		return 0, session.Stats{}, err
	}
	if err := setup.Exec("PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t SELECT value, 0 FROM generate_series(1, 64)"); err != nil {
		return 0, session.Stats{}, err
	}
	setup.Close()
	if err := db.Durable(ctx); err != nil {
		return 0, session.Stats{}, err
	}
	before := db.Stats()
	var commits atomic.Int64
	var firstErr error
	var errOnce sync.Once
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
			c, err := db.Conn()
			if err != nil {
				fail(err)
				return
			}
			defer c.Close()
			c.Exec("PRAGMA synchronous=NORMAL")
			s, _, err := c.Prepare("UPDATE t SET n = n + 1 WHERE id = ?")
			if err != nil {
				fail(err)
				return
			}
			defer s.Close()
			for time.Now().Before(deadline) {
				s.BindInt(1, w+1)
				if err := s.Exec(); err != nil {
					fail(err)
					return
				}
				if mode == session.Async {
					if err := db.Durable(ctx); err != nil {
						fail(err)
						return
					}
				}
				commits.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := db.Stats()
	st.Commits -= before.Commits
	st.Batches -= before.Batches
	st.PUTs -= before.PUTs
	return float64(commits.Load()) / elapsed.Seconds(), st, firstErr
}
