package main

import (
	crand "crypto/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/stretchr/testify/require"
)

// peersRoundsEnv overrides TestPeersCrashTakeover's rounds on the
// directory bucket (the by-hand run: PEERS_ROUNDS=100).
const peersRoundsEnv = "PEERS_ROUNDS"

// TestPeersCrashTakeover: five nodes acknowledging writes by followers
// (three per actor, quorum two) and uploading to the bucket at most every
// 10 s. Round after round, the owner of a busy actor and one of that
// actor's followers are killed together (SIGKILL): the most a quorum of
// two among three tolerates. Another node takes the actors over from the
// followers left (the bucket lacks their last seconds of writes), and
// the killed slots restart on their directories (the same follower
// stores). In the end every acknowledged write is there, with the id it
// was acknowledged with, once: as the nodes serve it and as the bucket
// restores it. And the followers did the work: acknowledgements came from
// them (not all from the bucket, which would pass the rest of the test
// too), and takeovers recovered tails the bucket lacked from them.
//
// By hand, 100 rounds:
//
//	PEERS_ROUNDS=100 go test ./examples/actorhost -run 'TestPeersCrashTakeover/dir' -timeout 60m -v
func TestPeersCrashTakeover(t *testing.T) {
	rounds := map[string]int{"dir": 10, "s3": 3}
	if n, err := strconv.Atoi(os.Getenv(peersRoundsEnv)); err == nil && n > 0 {
		rounds["dir"] = n
	}
	forBackends(t, rounds, peersCrashTakeover)
}

func peersCrashTakeover(t *testing.T, b bucket.Bucket, rounds int) {
	ctx := t.Context()
	c := newCluster(t, b, append(slices.Clone(shortTimings), peerFlags(t)...)...)
	c.startN(5)
	c.startSupervisor()
	w := startWorkload(t, c, "peers", 10)
	tally := peerTally{}
	for round := range rounds {
		w.startRound(t, round)
		tally.scrape(t, c) // before any of them dies with its counters
		owner, its := busyHolder(t, c, w, round)
		// One follower of one of its actors dies with it.
		rec, _, err := fence.ReadRecord(ctx, b, actorOf(its[0].ns, its[0].id))
		require.NoError(t, err)
		victims := []*proc{owner}
		if len(rec.Followers) > 0 {
			f := rec.Followers[rand.IntN(len(rec.Followers))]
			for _, p := range c.live() {
				if p != owner && followerID(t, p) == f {
					victims = append(victims, p)
				}
			}
		}
		slowest := killAndAwaitTakeover(t, ctx, c, w, round, victims, its)
		t.Logf("round %d: killed owner node%d (%d actors) and %d of its followers; all served elsewhere %v later",
			round, owner.slot, len(its), len(victims)-1, slowest.Round(time.Millisecond))
		for _, p := range victims {
			c.start(p.slot) // a new node on the same directory: the same follower store
		}
	}
	w.stop()
	tally.scrape(t, c)
	attempts, acks, unavail := w.totals()
	byFollowers, recovered := tally.sum()
	t.Logf("%d writes attempted, %d acknowledged, %d answered 503 + Retry-After; %v acknowledgements by followers, %v takeovers recovered a tail",
		attempts, acks, unavail, byFollowers, recovered)
	require.Positive(t, byFollowers, "acknowledgements by followers (framectl_quorum_acks_total{by=followers}, summed over every process)")
	require.Positive(t, recovered, "takeovers that recovered a tail from the followers (framectl_quorum_tails_recovered_total)")
	w.checkNoUnexpected(t)
	checkFinalState(t, ctx, c, b, w)
}

// peerTally keeps, per process, the last figures of the follower protocol
// scraped from its /metrics: a killed process takes its counters with it.
type peerTally map[*proc][2]float64

// scrape reads every live process's acknowledgements by followers and
// takeovers that recovered a tail.
func (pt peerTally) scrape(t *testing.T, c *cluster) {
	t.Helper()
	for _, p := range c.live() {
		s, err := scrapeProc(t.Context(), p)
		if err != nil {
			t.Logf("node%d: %v (its last figures stand)", p.slot, err)
			continue
		}
		// Absent series are zero: nothing counted yet.
		acks, _ := s.Find("framectl_quorum_acks_total", "by", "followers")
		recovered, _ := s.Find("framectl_quorum_tails_recovered_total")
		pt[p] = [2]float64{acks, recovered}
	}
}

// sum adds up the last figures of every process.
func (pt peerTally) sum() (byFollowers, recovered float64) {
	for _, v := range pt {
		byFollowers += v[0]
		recovered += v[1]
	}
	return byFollowers, recovered
}

// peerFlags make a node acknowledge writes by followers as these tests
// run it: three followers per actor (quorum two, -quorum's default),
// uploads at most every 10 s (so the bucket lacks the last seconds of
// writes), and a new cluster key in a file of t's.
func peerFlags(t testing.TB) []string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	key := make([]byte, 32)
	_, err := crand.Read(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, key, 0o600))
	return []string{"-peer-listen", "127.0.0.1:0", "-cluster-key-file", keyFile, "-followers", "3", "-upload-interval", "10s"}
}

// followerID is the follower ID of p's store (tails.Store.ID).
func followerID(t testing.TB, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.data, "tails", "follower.id"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}
