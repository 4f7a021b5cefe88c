package compact_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/require"
)

// TestFaultyBucket compacts through a bucket that fails: random errors on
// every operation, snapshot uploads that fail, or land but are reported
// failed,
// deletes that fail, deletes that stop half way. Whatever a pass does, the
// session still replays, from the real bucket behind the faults, to the
// database at its last durable frame; and a pass without faults afterwards
// finishes the job.
func TestFaultyBucket(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			inner := be.New(t)
			d := newDB(t, inner)
			a := d.actor
			rng := mrand.New(mrand.NewPCG(11, 11))
			faults := []struct {
				name string
				wrap func(seed uint64) bucket.Bucket
			}{
				{"random errors", func(seed uint64) bucket.Bucket {
					return buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: seed, ErrorRate: 0.2})
				}},
				{"snapshot upload fails", func(seed uint64) bucket.Bucket {
					return buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: seed, ErrorRateByOp: map[string]float64{"put": 1}})
				}},
				{"snapshot upload lands, reported failed", func(seed uint64) bucket.Bucket {
					return buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: seed, LostResponseRate: 1})
				}},
				{"deletes fail", func(seed uint64) bucket.Bucket {
					return buckettest.NewFaulty(inner, buckettest.FaultConfig{Seed: seed, ErrorRateByOp: map[string]float64{"delete": 1}})
				}},
				{"deletes stop half way", func(uint64) bucket.Bucket { return &halfDeletes{Bucket: inner} }},
			}
			failed := map[string]int{}
			for round := range 3 * len(faults) {
				d.work(rng, 6)
				last := d.durable()
				img := d.image()
				f := faults[round%len(faults)]
				opts := testOptions(t)
				opts.Force = true
				res, err := compact.Actor(t.Context(), f.wrap(uint64(round)), a, opts)
				if err != nil {
					failed[f.name]++
					t.Logf("round %d (%s): %v", round, f.name, err)
				}
				scratchEmpty(t, opts.ScratchDir)
				got, seq, err := replayTo(t, inner, a, 1, 0)
				require.NoError(t, err, "round %d (%s): after a pass (deleted %d) the session does not replay", round, f.name, len(res.Deleted))
				if seq != last {
					t.Fatalf("round %d (%s): the session replays to %d, the last durable frame is %d", round, f.name, seq, last)
				}
				dbtest.SameBytes(t, fmt.Sprintf("round %d (%s)", round, f.name), got, img)
			}
			for _, f := range faults[1:] {
				if failed[f.name] == 0 {
					t.Errorf("%s: no pass failed, so the fault was never exercised", f.name)
				}
			}

			opts := testOptions(t)
			opts.Force = true
			res := mustCompact(t, inner, a, opts)
			st := stateOf(t, inner, a, 1)
			if len(st.snapshots) != 1 || len(st.batches) != 0 {
				t.Fatalf("a clean pass after the faults left snapshots %v and batches %v (deleted %d): want one snapshot", st.snapshots, st.batches, len(res.Deleted))
			}
		})
	}
}

// halfDeletes deletes the first half of every DeleteMany, then fails: a
// pass cut short in the middle of its deletes.
type halfDeletes struct{ bucket.Bucket }

var errHalf = errors.New("deletes stopped half way")

func (h *halfDeletes) DeleteMany(ctx context.Context, keys []string) error {
	if err := h.Bucket.DeleteMany(ctx, keys[:len(keys)/2]); err != nil {
		return err
	}
	return &bucket.Error{Op: "delete", Key: keys[len(keys)/2], Err: errHalf}
}
