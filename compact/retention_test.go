package compact_test

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/require"
)

// TestRetention: with a window, the objects a new snapshot covers survive
// the pass that wrote it (every durable point still replays: point-in-time
// restore), survive while the snapshot is younger than the window, and go
// in the first pass after it has aged out of it.
func TestRetention(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := openDB(t, b, t.TempDir(), newActorID(), 1)
			a := d.actor
			rng := mrand.New(mrand.NewPCG(3, 3))
			orc := newOracle()
			for range 5 {
				d.work(rng, 8)
				orc.record(d.durable(), d.image())
			}
			last := d.durable()
			before := stateOf(t, b, a, 1)
			covered := len(before.snapshots) + len(before.batches)

			// The bucket's clock and ours agree here; the window is an hour.
			clock := buckettest.NewClock(time.Now())
			opts := testOptions(t)
			opts.Retention, opts.Now, opts.Force = time.Hour, clock.Now, true
			res, err := compact.Actor(t.Context(), b, a, opts)
			require.NoError(t, err)
			if res.Snapshot != a.SnapshotKey(1, last) || len(res.Deleted) != 0 || res.Retained != covered {
				t.Fatalf("first pass: snapshot %q, deleted %v, retained %d; want a snapshot at %d, nothing deleted, %d retained",
					res.Snapshot, res.Deleted, res.Retained, last, covered)
			}
			for _, f := range orc.seqs() {
				got, _, err := replayTo(t, b, a, 1, f)
				require.NoError(t, err, "point-in-time replay to %d inside the window", f)
				img, _ := orc.get(f)
				dbtest.SameBytes(t, fmt.Sprintf("point-in-time replay to %d", f), got, img)
			}

			clock.Advance(45 * time.Minute)
			res, err = compact.Actor(t.Context(), b, a, opts)
			if err != nil || len(res.Deleted) != 0 || res.Retained != covered || res.Snapshot != "" {
				t.Fatalf("pass inside the window: %+v, %v: want nothing deleted, %d retained", res, err, covered)
			}

			clock.Advance(30 * time.Minute)
			res, err = compact.Actor(t.Context(), b, a, opts)
			if err != nil || len(res.Deleted) != covered || res.Retained != 0 {
				t.Fatalf("pass after the window: deleted %d, retained %d, %v: want %d deleted", len(res.Deleted), res.Retained, err, covered)
			}
			if st := stateOf(t, b, a, 1); !slices.Equal(st.snapshots, []frames.Seq{last}) || len(st.batches) != 0 {
				t.Fatalf("after the window: snapshots %v, batches %v", st.snapshots, st.batches)
			}
			img, _ := orc.get(last)
			got, _ := mustReplay(t, b, a, 1)
			dbtest.SameBytes(t, "replay after retention", got, img)
		})
	}
}

// A retention the writer recorded in own.json is kept by a pass asked for
// less, unless the pass is told to shorten it.
func TestRecordedRetention(t *testing.T) {
	b := buckettest.Dir(t)
	d := openDB(t, b, t.TempDir(), newActorID(), 1)
	a := d.actor
	rng := mrand.New(mrand.NewPCG(4, 4))
	for range 3 {
		d.work(rng, 8)
	}
	d.durable()
	rec := fence.Record{Epoch: 1, Retention: time.Hour}.Marshal()
	_, err := b.Put(t.Context(), a.OwnKey(), bytes.NewReader(rec), int64(len(rec)), bucket.Condition{})
	require.NoError(t, err)
	before := stateOf(t, b, a, 1)
	covered := len(before.snapshots) + len(before.batches)

	opts := testOptions(t)
	opts.Force = true
	res, err := compact.Actor(t.Context(), b, a, opts)
	require.NoError(t, err)
	if len(res.Deleted) != 0 || res.Retained != covered || res.Retention != time.Hour || !res.RetentionRecorded {
		t.Fatalf("pass with no retention over a recorded hour: deleted %v, retained %d, retention %v (recorded %v); want nothing deleted, %d retained, an hour",
			res.Deleted, res.Retained, res.Retention, res.RetentionRecorded, covered)
	}
	opts.ShortenRetention = true
	res, err = compact.Actor(t.Context(), b, a, opts)
	require.NoError(t, err)
	if len(res.Deleted) != covered || res.Retention != 0 || res.RetentionRecorded {
		t.Fatalf("pass told to shorten: deleted %d, retention %v; want %d deleted, no retention", len(res.Deleted), res.Retention, covered)
	}
}
