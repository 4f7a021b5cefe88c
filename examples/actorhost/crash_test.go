package main

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/require"
)

// shortTimings keep failovers short: a node is fenced 1.5 s after its
// last heartbeat was seen. Idle actors stay open for the whole test unless
// a test asks otherwise.
var shortTimings = []string{"-lease", "1s", "-grace", "500ms", "-idle", "10m"}

// hangGuard bounds every wait for something that must happen: reaching it
// fails the test as "never happened", not as "too slow".
const hangGuard = 90 * time.Second

// TestCrashTakeover: three nodes, a caller writing to 20 actors through
// random nodes; round after round the node holding some of the busy actors
// is killed (SIGKILL), another node serves its actors once its lease plus
// grace has run out, and the killed slot restarts as a new node at the
// same address. In the end, every acknowledged write is there, with the id
// it was acknowledged with, once; as the nodes serve it and as the bucket
// restores it.
func TestCrashTakeover(t *testing.T) {
	forBackends(t, map[string]int{"dir": 10, "s3": 5}, crashTakeover)
}

func crashTakeover(t *testing.T, b bucket.Bucket, rounds int) {
	ctx := t.Context()
	c := newCluster(t, b, shortTimings...)
	c.startN(3)
	c.startSupervisor()
	w := startWorkload(t, c, "crash", 20)
	for round := range rounds {
		w.startRound(t, round)
		victim, its := busyHolder(t, c, w, round)
		slowest := killAndAwaitTakeover(t, ctx, c, w, round, []*proc{victim}, its)
		t.Logf("round %d: killed node%d holding %d actors; all served elsewhere %v later", round, victim.slot, len(its), slowest.Round(time.Millisecond))
		c.start(victim.slot) // a new node at the same address
	}
	w.stop()
	attempts, acks, unavail := w.totals()
	t.Logf("%d writes attempted, %d acknowledged, %d answered 503 + Retry-After", attempts, acks, unavail)
	w.checkNoUnexpected(t)
	checkFinalState(t, ctx, c, b, w)
}

// forBackends runs run on every backend with the rounds given for it (2
// with -short).
func forBackends(t *testing.T, rounds map[string]int, run func(t *testing.T, b bucket.Bucket, rounds int)) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			n := rounds[be.Name]
			if testing.Short() {
				n = 2
			}
			run(t, be.New(t), n)
		})
	}
}

// busyHolder picks the victim of a round: a random live node that holds
// at least one of w's busy actors. It returns the node and the streams of
// the actors it holds.
func busyHolder(t *testing.T, c *cluster, w *workload, round int) (*proc, []*stream) {
	t.Helper()
	owners := w.owners()
	var holders []string
	for id := range owners {
		if p := c.byID(id); p != nil && !p.isDown() {
			holders = append(holders, id)
		}
	}
	if len(holders) == 0 {
		t.Fatalf("round %d: no live node holds an actor", round)
	}
	slices.Sort(holders)
	p := c.byID(holders[rand.IntN(len(holders))])
	return p, owners[p.id]
}

// killAndAwaitTakeover SIGKILLs victims together, waits until every
// stream of its (the actors victims[0] held) has a write acknowledged
// after they died, checks that no victim acknowledged a write sent after
// its death, and returns the longest wait from the kill to such a write.
func killAndAwaitTakeover(t *testing.T, ctx context.Context, c *cluster, w *workload, round int, victims []*proc, its []*stream) time.Duration {
	t.Helper()
	killed := time.Now()
	for _, p := range victims {
		p.kill()
	}
	for _, p := range victims {
		if _, ok := p.wait(hangGuard); !ok {
			t.Fatalf("round %d: node%d survived SIGKILL", round, p.slot)
		}
	}
	dead := time.Now()
	if !waitFor(ctx, hangGuard, func() bool {
		for _, s := range its {
			if len(s.acksSentAfter(dead)) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("round %d: the actors of the killed node%d were not served elsewhere", round, victims[0].slot)
	}
	var slowest time.Duration
	for _, s := range its {
		slowest = max(slowest, s.acksSentAfter(dead)[0].at.Sub(killed))
	}
	for _, s := range w.streams {
		for _, a := range s.acksSentAfter(dead) {
			for _, v := range victims {
				if a.node == v.id {
					t.Errorf("round %d: %s: the killed node%d acknowledged %q, sent after it died", round, s.id, v.slot, a.body)
				}
			}
		}
	}
	return slowest
}

// checkFinalState checks every stream's acknowledged writes: through the
// nodes, then drains every node (exit 0) and checks what the bucket
// restores.
func checkFinalState(t *testing.T, ctx context.Context, c *cluster, b bucket.Bucket, w *workload) {
	t.Helper()
	gctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	for _, s := range w.streams {
		checkEpochs(t, c, s.id, s.acks)
		notes, _, err := getNotes(gctx, c, s.ns, s.id)
		require.NoError(t, err)
		checkNotes(t, "served", s.id, s.acks, notes)
	}
	drainAll(t, c)
	for _, s := range w.streams {
		notes, _ := restoredNotes(t, b, s.ns, s.id)
		checkNotes(t, "restored", s.id, s.acks, notes)
	}
}

// drainAll sends SIGTERM to every live node and checks each exits 0.
func drainAll(t *testing.T, c *cluster) {
	t.Helper()
	live := c.live()
	for _, p := range live {
		p.terminate()
	}
	for _, p := range live {
		if code, ok := p.wait(hangGuard); !ok {
			t.Fatalf("node%d did not exit after SIGTERM", p.slot)
		} else if code != exitOK {
			t.Errorf("node%d drained with exit code %d\n%s", p.slot, code, p.logTail(20))
		}
	}
}
