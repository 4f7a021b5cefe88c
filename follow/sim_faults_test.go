package follow

import (
	"fmt"
	"strings"
	"testing"
)

// TestSimulationCatchesFaults breaks the protocol on purpose, one rule at a
// time (faults.go), and requires the simulation to fail: a simulation that
// passes whatever the code does proves nothing. Each fault must be caught
// within the seeds TestSimulation runs by default.
var faultSeeds = 20000

func TestSimulationCatchesFaults(t *testing.T) {
	for _, c := range []struct {
		name string
		set  *bool
	}{
		{"takeover from n-q answers", &faults.fewerAnswers},
		{"acknowledge at q-1", &faults.ackBelowQuorum},
		{"longest log, not newest", &faults.longestNotNewest},
		{"tail not chained from the bucket", &faults.ignoreBucketChain},
		{"follower ignores fences", &faults.noFenceCheck},
		{"follower takes unchained entries", &faults.noChainCheck},
		{"replacement counts before it caught up", &faults.noCatchUp},
		{"reset carries part of the tail", &faults.partialReset},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			*c.set = true
			defer func() { *c.set = false }()
			for _, cfg := range simConfigs {
				for seed := range int64(faultSeeds) {
					if err := newWorld(seed, cfg, false).run(simSteps); err != nil {
						first, _, _ := strings.Cut(err.Error(), "\n")
						t.Logf("caught at %s: %s", cfg, first)
						return
					}
				}
			}
			t.Errorf("%s: no schedule of %d seeds in %v failed", c.name, faultSeeds, fmt.Sprint(simConfigs))
		})
	}
}
