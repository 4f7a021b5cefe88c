package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// TestHandoff: three nodes under load (writers and readers on 20 actors);
// the node holding the most actors gets SIGTERM. It finishes its requests,
// releases its actors and deregisters (exit 0); its actors are claimed
// elsewhere at once; nothing acknowledged is lost; and readers see only
// retries (503 + Retry-After, or an answer through another node), never an
// error: every read, retried as Retry-After says, succeeds, and shows
// every write acknowledged before it was sent.
func TestHandoff(t *testing.T) {
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) { handoff(t, be.New(t), rounds) })
	}
}

func handoff(t *testing.T, b bucket.Bucket, rounds int) {
	ctx := t.Context()
	c := newCluster(t, b, shortTimings...)
	c.startN(3)
	c.startSupervisor()
	w := startWorkload(t, c, "handoff", 20)
	rd := startReaders(c, w.streams)
	for round := range rounds {
		w.startRound(t, round)
		// The live node that made the most latest acknowledgements. A node
		// can lose its lease to a loaded machine between rounds (the
		// supervisor restarts it under a new ID): wait for the actors'
		// next acknowledgements to name a live one.
		var victim *proc
		var its []*stream
		waitFor(ctx, hangGuard, func() bool {
			victim, its = nil, nil
			for id, ss := range w.owners() {
				if p := c.byID(id); p != nil && !p.isDown() && len(ss) > len(its) {
					victim, its = p, ss
				}
			}
			return victim != nil
		})
		if victim == nil {
			t.Fatalf("round %d: no live node holds an actor", round)
		}
		termed := time.Now()
		victim.terminate()
		code, ok := victim.wait(hangGuard)
		if !ok {
			t.Fatalf("round %d: node%d did not exit after SIGTERM", round, victim.slot)
		}
		exited := time.Now()
		if code != exitOK {
			t.Errorf("round %d: node%d drained with exit code %d\n%s", round, victim.slot, code, victim.logTail(20))
		}
		if _, err := b.Stat(ctx, frames.NodeKey(victim.id)); !errors.Is(err, bucket.ErrNotFound) {
			t.Errorf("round %d: node%d's lease is still there after the drain (%v)", round, victim.slot, err)
		}
		if !waitFor(ctx, hangGuard, func() bool {
			for _, s := range its {
				if len(s.acksSentAfter(exited)) == 0 {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("round %d: the actors of the drained node%d were not served elsewhere", round, victim.slot)
		}
		var slowest time.Duration
		for _, s := range its {
			slowest = max(slowest, s.acksSentAfter(exited)[0].at.Sub(termed))
		}
		t.Logf("round %d: SIGTERM to node%d holding %d actors: exited after %v; all served elsewhere %v after the signal",
			round, victim.slot, len(its), exited.Sub(termed).Round(time.Millisecond), slowest.Round(time.Millisecond))
		c.start(victim.slot)
	}
	w.stop()
	rd.stop()
	_, acks, unavail := w.totals()
	t.Logf("writes: %d acknowledged, %d answers 503 + Retry-After; reads: %d, %d retried after a 503, longest %v",
		acks, unavail, rd.reads, rd.retried, rd.longest.Round(time.Millisecond))
	w.checkNoUnexpected(t)
	rd.check(t)
	checkFinalState(t, ctx, c, b, w)
}

// readers read every actor's notes in a loop through random nodes, each
// read retried until it succeeds, waiting as Retry-After says.
type readers struct {
	c      *cluster
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	reads    int
	retried  int // reads that needed more than one attempt
	longest  time.Duration
	failures []string
	connErrs connErrors
}

func startReaders(c *cluster, streams []*stream) *readers {
	ctx, cancel := context.WithCancel(context.Background())
	rd := &readers{c: c, ctx: ctx, cancel: cancel}
	c.t.Cleanup(rd.stop)
	for _, s := range streams {
		rd.wg.Add(1)
		go func() {
			defer rd.wg.Done()
			for ctx.Err() == nil {
				rd.read(s)
			}
		}()
	}
	return rd
}

func (rd *readers) fail(format string, a ...any) {
	rd.mu.Lock()
	rd.failures = append(rd.failures, fmt.Sprintf(format, a...))
	rd.mu.Unlock()
}

// read is one read, retried until it succeeds (or the test ends).
func (rd *readers) read(s *stream) {
	sent := time.Now()
	// Everything acknowledged before the read was sent must be in it.
	s.mu.Lock()
	var before []ack
	for _, a := range s.acks {
		if a.at.Before(sent) {
			before = append(before, a)
		}
	}
	s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		p := rd.c.pick()
		if p == nil {
			sleepCtx(rd.ctx, 50*time.Millisecond)
			continue
		}
		r := do(rd.ctx, http.MethodGet, actorURL(p, s.ns, s.id, "notes"), "")
		if rd.ctx.Err() != nil {
			return
		}
		switch {
		case r.err == nil && r.status == http.StatusOK:
			var notes []note
			if err := json.Unmarshal(r.body, &notes); err != nil {
				rd.fail("%s: GET via node%d: %v", s.id, p.slot, err)
				return
			}
			have := make(map[string]int64, len(notes))
			for _, n := range notes {
				have[n.Body] = n.ID
			}
			for _, a := range before {
				if have[a.body] != a.id {
					rd.fail("%s: a read via node%d (served by %s, epoch %d) misses %q (id %d), acknowledged before the read was sent",
						s.id, p.slot, rd.c.nodeName(r.node), r.epoch, a.body, a.id)
					break
				}
			}
			rd.mu.Lock()
			rd.reads++
			if attempt > 1 {
				rd.retried++
			}
			rd.longest = max(rd.longest, time.Since(sent))
			rd.mu.Unlock()
			return
		case r.err == nil && r.status == http.StatusServiceUnavailable && r.retryAfter != "":
			sleepCtx(rd.ctx, retryDelay(r))
		case r.err != nil:
			// Fine if the node was going down: a caller tries another.
			rd.connErrs.add(p, fmt.Sprintf("%s: GET via node%d: %v", s.id, p.slot, r))
		default:
			rd.fail("%s: GET via node%d: %v", s.id, p.slot, r)
			sleepCtx(rd.ctx, 100*time.Millisecond)
		}
		if time.Since(sent) > hangGuard {
			rd.fail("%s: a read did not succeed within %v", s.id, hangGuard)
			return
		}
	}
}

func (rd *readers) stop() {
	rd.cancel()
	rd.wg.Wait()
}

func (rd *readers) check(t testing.TB) {
	t.Helper()
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for i, f := range append(rd.failures, rd.connErrs.unexpected()...) {
		if i == 20 {
			t.Errorf("... %d read failures in all", len(rd.failures))
			break
		}
		t.Error(f)
	}
}
