package compact_test

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
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
			d := newDB(t, b)
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
			res := mustCompact(t, b, a, opts)
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
			res, err := compact.Actor(t.Context(), b, a, opts)
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
	d := newDB(t, b)
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
	res := mustCompact(t, b, a, opts)
	if len(res.Deleted) != 0 || res.Retained != covered || res.Retention != time.Hour || !res.RetentionRecorded {
		t.Fatalf("pass with no retention over a recorded hour: deleted %v, retained %d, retention %v (recorded %v); want nothing deleted, %d retained, an hour",
			res.Deleted, res.Retained, res.Retention, res.RetentionRecorded, covered)
	}
	opts.ShortenRetention = true
	res = mustCompact(t, b, a, opts)
	if len(res.Deleted) != covered || res.Retention != 0 || res.RetentionRecorded {
		t.Fatalf("pass told to shorten: deleted %d, retention %v; want %d deleted, no retention", len(res.Deleted), res.Retention, covered)
	}
}

// TestRetentionFollowsLineage: within the window, a pass keeps what
// restore can reach across sessions (the lineage: session 3 continued
// session 2, which continued session 1) and nothing more: the batches a
// zombie owner of session 1 uploaded after session 2 took over go at once.
// Past the grace, the chunks only superseded manifests name stay while
// those manifests are kept, and every point of the history still restores
// byte for byte. Once the window has passed, the superseded sessions go.
func TestRetentionFollowsLineage(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			id := newActorID()
			rng := mrand.New(mrand.NewPCG(9, 9))
			orc := newOracle()
			z := openDB(t, b, t.TempDir(), id, 1)
			a := z.actor
			for range 3 {
				z.work(rng, 6)
				orc.record(z.durable(), z.image())
			}
			dir := t.TempDir()
			d := openDB(t, b, dir, id, 2) // restores session 1
			took := d.durable()
			z.work(rng, 10) // the zombie's late commits, in session 1
			z.durable()
			inv, err := restore.Take(t.Context(), b, a)
			require.NoError(t, err)
			s1, _ := inv.Session(1)
			var late []string
			for _, o := range s1.Batches {
				if o.Seq > took {
					late = append(late, o.Key)
				}
			}
			require.NotEmpty(t, late, "the zombie's batches")
			for range 3 {
				d.work(rng, 6)
				orc.record(d.durable(), d.image())
			}
			opts := testOptions(t)
			opts.Retention, opts.Force = 3*time.Hour, true
			res := mustCompact(t, b, a, opts) // session 2 gets a second manifest
			slices.Sort(late)
			deleted := slices.Clone(res.Deleted)
			slices.Sort(deleted)
			require.Equal(t, late, deleted, "inside the window: exactly the zombie's late batches go")
			d.close()
			d = openDB(t, b, dir, id, 3) // a wake: continues session 2
			for range 3 {
				d.work(rng, 6)
				orc.record(d.durable(), d.image())
			}

			restoresAll := func(when string) {
				t.Helper()
				for _, seq := range orc.seqs() {
					dest := t.TempDir() + "/r.db"
					res, err := restore.Restore(t.Context(), b, a, dest, restore.Options{Target: restore.ToSeq(seq)})
					require.NoError(t, err, "%s: restore to seq %d", when, seq)
					require.Equal(t, seq, res.Seq, "%s: restore to seq %d", when, seq)
					got, err := os.ReadFile(dest)
					require.NoError(t, err)
					img, _ := orc.get(seq)
					dbtest.SameBytes(t, fmt.Sprintf("%s: seq %d", when, seq), got, img)
				}
			}

			opts.Force = false
			res = mustCompact(t, b, a, opts)
			require.Empty(t, res.Deleted, "inside the window, sessions 1 and 2 are history")
			restoresAll("inside the window")

			// Two hours on: inside the window, past the grace.
			clock := buckettest.NewClock(time.Now().Add(2 * time.Hour))
			opts.Now = clock.Now
			for range 2 {
				res = mustCompact(t, b, a, opts)
				require.Empty(t, res.Deleted, "inside the window")
			}
			requireNamedPresent(t, b, a, "past the grace")
			restoresAll("past the grace")

			// Past the window: only session 3 is left.
			clock.Advance(2 * time.Hour)
			res = mustCompact(t, b, a, opts)
			inv, err = restore.Take(t.Context(), b, a)
			require.NoError(t, err)
			require.Len(t, inv.Sessions, 1, "sessions past the window")
			require.Equal(t, frames.Epoch(3), inv.Sessions[0].Epoch)
			got, _ := restoreLatest(t, b, a)
			img, _ := orc.get(orc.seqs()[len(orc.seqs())-1])
			dbtest.SameBytes(t, "latest past the window", got, img)
		})
	}
}
