package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// TestClaimRace: eight nodes get a request for each of the same 50
// actors at the same moment, so eight claims race for every actor; the
// actors then hibernate (released) and the next burst races again. Exactly
// one node owns an actor per epoch (no two nodes acknowledge in one
// epoch), epochs only grow (every burst's are above the last one's), and
// no acknowledged write is lost.
func TestClaimRace(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) { claimRace(t, be.New(t)) })
	}
}

func claimRace(t *testing.T, b bucket.Bucket) {
	const procs, actors = 8, 50
	bursts := 3
	if testing.Short() {
		bursts = 2
	}
	ctx := t.Context()
	// A 2 s lease: eight nodes opening 50 actors at once on two cores
	// must not lose their leases to a slow renewal.
	c := newCluster(t, b, "-lease", "2s", "-grace", "1s", "-idle", "300ms")
	ps := c.startN(procs)
	c.startSupervisor()
	const ns = "race"
	streams := make([]*stream, actors)
	for j := range streams {
		streams[j] = &stream{ns: ns, id: fmt.Sprintf("r%02d", j)}
	}
	burstEpochs := make([]map[string][2]frames.Epoch, bursts) // actor -> [min, max] epoch acknowledged
	for burst := range bursts {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for _, p := range ps {
			for _, s := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if _, err := s.postUntilOK(ctx, p); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}()
			}
		}
		began := time.Now()
		close(start)
		wg.Wait()
		for _, err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
		epochs := map[string][2]frames.Epoch{}
		for _, s := range streams {
			for _, a := range s.acksSentAfter(began) {
				e, ok := epochs[s.id]
				if !ok {
					e = [2]frames.Epoch{a.epoch, a.epoch}
				}
				epochs[s.id] = [2]frames.Epoch{min(e[0], a.epoch), max(e[1], a.epoch)}
			}
		}
		burstEpochs[burst] = epochs
		t.Logf("burst %d: %d writes acknowledged in %v", burst, procs*actors, time.Since(began).Round(time.Millisecond))
		// Every actor hibernates: the next burst's claims race again.
		if !waitFor(ctx, hangGuard, func() bool { return allReleased(t, b, ns, streams) }) {
			t.Fatal("the actors were not released after -idle")
		}
	}

	for burst := 1; burst < bursts; burst++ {
		for _, s := range streams {
			prev, cur := burstEpochs[burst-1][s.id], burstEpochs[burst][s.id]
			if cur[0] <= prev[1] {
				t.Errorf("%s: burst %d acknowledged in epoch %d, burst %d already in epoch %d", s.id, burst, cur[0], burst-1, prev[1])
			}
		}
	}
	_, acked, unavail := totals(streams)
	t.Logf("%d writes acknowledged, %d answers 503 + Retry-After", acked, unavail)
	gctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	for _, s := range streams {
		for _, u := range append(s.unexpected, s.connErrs.unexpected()...) {
			t.Errorf("%s: unexpected answer: %s", s.id, u)
		}
		checkEpochs(t, c, s.id, s.acks)
		notes, _, err := getNotes(gctx, c, ns, s.id)
		require.NoError(t, err)
		checkNotes(t, "served", s.id, s.acks, notes)
		if len(notes) != len(s.acks) {
			// Every write was retried until acknowledged, and a write
			// that failed was not committed: nothing else is there.
			t.Logf("%s: %d notes, %d acknowledged", s.id, len(notes), len(s.acks))
		}
	}
}

// allReleased reports whether no node holds any of the actors.
func allReleased(t testing.TB, b bucket.Bucket, ns string, streams []*stream) bool {
	for _, s := range streams {
		a := actorOf(ns, s.id)
		data, _, err := bucket.ReadAll(t.Context(), b, a.OwnKey(), fence.MaxRecordBytes)
		if err != nil {
			return false
		}
		rec, err := fence.ParseRecord(a.OwnKey(), data)
		require.NoError(t, err)
		if !rec.Released() {
			return false
		}
	}
	return true
}

func totals(streams []*stream) (attempts, acks, unavail int) {
	for _, s := range streams {
		s.mu.Lock()
		attempts, acks, unavail = attempts+s.attempts, acks+len(s.acks), unavail+s.unavail
		s.mu.Unlock()
	}
	return
}
