package compact_test

import (
	"bytes"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"strings"
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

// TestActorCompactsReplicatedDatabase replicates a real SQLite database,
// then compacts it while the newest batches are not yet visible in
// listings (a bucket whose listings lag, as a live writer's newest uploads
// are to a pass that listed just before them): the snapshot lands at the
// last frame listed, what it covers is gone, the batches after it are all
// kept, and the session replays byte for byte to the database at its last
// durable frame and at the snapshot's frame.
func TestActorCompactsReplicatedDatabase(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			inner := be.New(t)
			clock := buckettest.NewClock(time.Now())
			const lag = time.Hour
			b := buckettest.NewFaulty(inner, buckettest.FaultConfig{Lag: lag, Now: clock.Now})
			d := newDB(t, b)
			a := d.actor
			rng := mrand.New(mrand.NewPCG(1, 2))

			// Phase 1, visible to the pass.
			orc := newOracle()
			for range 6 {
				d.work(rng, 10)
				f := d.durable()
				orc.record(f, d.image())
			}
			f1 := d.durable()
			clock.Advance(2 * lag)
			// Phase 2, uploaded but not yet listed: two small commits, a
			// log far below the database's size.
			for range 2 {
				d.exec("INSERT INTO t(b) VALUES(randomblob(100))")
				d.durable()
			}
			f2 := d.durable()
			img2 := d.image()
			before := stateOf(t, inner, a, 1)
			var phase2 []frames.Seq
			for _, f := range before.batches {
				if f > f1 {
					phase2 = append(phase2, f)
				}
			}
			if len(phase2) == 0 {
				t.Fatal("phase 2 uploaded no batch")
			}
			objBytes := int64(0)
			inv, err := restore.Take(t.Context(), inner, a)
			require.NoError(t, err)
			s, _ := inv.Session(1)
			for _, o := range s.Snapshots {
				objBytes += o.Size
			}
			for _, o := range s.Batches {
				if o.Seq <= f1 {
					objBytes += o.Size
				}
			}
			// The snapshot is a manifest: the replay reads its chunks, the
			// only ones in the bucket so far.
			chunksBefore := map[string]bool{}
			for _, c := range inv.Chunks {
				objBytes += c.Size
				chunksBefore[c.Key] = true
			}

			opts := testOptions(t)
			res := mustCompact(t, b, a, opts)
			t.Logf("pass 1: %+v", res)
			if !res.Due || res.RuleLogBytes < res.RuleDBBytes {
				t.Fatalf("the rule did not ask for a snapshot: log %d bytes, database %d", res.RuleLogBytes, res.RuleDBBytes)
			}
			if want := a.SnapshotKey(1, f1); res.Snapshot != want || res.Seq != f1 {
				t.Fatalf("wrote %q at frame %d, want %q at %d (the last frame listed)", res.Snapshot, res.Seq, want, f1)
			}
			after := stateOf(t, inner, a, 1)
			if !slices.Equal(after.snapshots, []frames.Seq{f1}) {
				t.Errorf("snapshots after the pass: %v, want only [%d]", after.snapshots, f1)
			}
			if !slices.Equal(after.batches, phase2) {
				t.Errorf("batches after the pass: %v, want exactly the unlisted ones %v", after.batches, phase2)
			}
			if len(res.Deleted) != len(before.snapshots)+len(before.batches)-len(phase2) {
				t.Errorf("deleted %d objects, want %d: %v", len(res.Deleted), len(before.snapshots)+len(before.batches)-len(phase2), res.Deleted)
			}
			// Every object read whole, and the start of the snapshot once
			// more for the rule.
			if res.BytesRead < objBytes || res.BytesRead > objBytes+before.newest.Size {
				t.Errorf("BytesRead %d, the objects read weigh %d (snapshot %d)", res.BytesRead, objBytes, before.newest.Size)
			}
			info, err := inner.Stat(t.Context(), res.Snapshot)
			require.NoError(t, err)
			// Written: the manifest and the chunks that were not in the
			// bucket; every chunk there before is still there.
			invAfter, err := restore.Take(t.Context(), inner, a)
			require.NoError(t, err)
			newChunks := int64(0)
			for _, c := range invAfter.Chunks {
				if !chunksBefore[c.Key] {
					newChunks += c.Size
				}
				delete(chunksBefore, c.Key)
			}
			require.Empty(t, chunksBefore, "chunks deleted by the pass")
			if res.BytesWritten != info.Size+newChunks || res.LeftLogBytes != 0 || res.LeftDBBytes == 0 {
				t.Errorf("BytesWritten %d (manifest %d, new chunks %d), left log %d, left database %d",
					res.BytesWritten, info.Size, newChunks, res.LeftLogBytes, res.LeftDBBytes)
			}
			scratchEmpty(t, opts.ScratchDir)

			got, seq := mustReplay(t, inner, a, 1)
			if seq != f2 {
				t.Fatalf("the session replays to %d, want the last durable frame %d", seq, f2)
			}
			dbtest.SameBytes(t, "replay of the compacted session vs the database", got, img2)
			img1, _ := orc.get(f1)
			got, _, err = replayTo(t, inner, a, 1, f1)
			require.NoError(t, err)
			dbtest.SameBytes(t, "replay to the snapshot's frame", got, img1)

			// A listing that still shows what pass 1 deleted (and not yet
			// what it wrote), as another compactor's would while this one
			// deletes: the objects vanish as the pass reads them, it lists
			// again, and gives up without deleting anything.
			res, err = compact.Actor(t.Context(), b, a, opts)
			if !errors.Is(err, compact.ErrRaced) || !errors.Is(err, bucket.ErrNotFound) || res.Attempts != compact.MaxAttempts || len(res.Deleted) != 0 {
				t.Fatalf("pass over a stale listing: attempts %d, deleted %v, %v: want compact.ErrRaced after %d attempts", res.Attempts, res.Deleted, err, compact.MaxAttempts)
			}
			st := stateOf(t, inner, a, 1)
			require.Equal(t, after.snapshots, st.snapshots, "the failed pass changed the bucket: %+v, was %+v", st, after)
			require.Equal(t, after.batches, st.batches, "the failed pass changed the bucket: %+v, was %+v", st, after)
			clock.Advance(2 * lag)
			res, err = compact.Actor(t.Context(), b, a, opts)
			if err != nil || res.Due || res.Snapshot != "" || len(res.Deleted) != 0 || res.RuleLogBytes == 0 {
				t.Fatalf("pass 3: %+v, %v: want a log below the rule and nothing done", res, err)
			}

			// Force compacts anyway.
			opts.Force = true
			res, err = compact.Actor(t.Context(), b, a, opts)
			if err != nil || res.Snapshot != a.SnapshotKey(1, f2) {
				t.Fatalf("forced pass: %+v, %v: want a snapshot at %d", res, err, f2)
			}
			clock.Advance(2 * lag) // let the listing see what the pass did
			if st := stateOf(t, inner, a, 1); !slices.Equal(st.snapshots, []frames.Seq{f2}) || len(st.batches) != 0 {
				t.Errorf("after the forced pass: snapshots %v, batches %v; want [%d] and none", st.snapshots, st.batches, f2)
			}
			got, _ = mustReplay(t, inner, a, 1)
			dbtest.SameBytes(t, "replay after the forced pass", got, img2)
			// Nothing left: Force writes nothing more.
			res, err = compact.Actor(t.Context(), b, a, opts)
			require.NoError(t, err, "forced pass over an empty log: %+v", res)
			require.Equal(t, "", res.Snapshot, "forced pass over an empty log: %+v", res)
			require.Len(t, res.Deleted, 0, "forced pass over an empty log: %+v", res)
		})
	}
}

// TestNamespace runs a pass over every actor of a namespace, and refuses a
// string that is not a namespace ID. The failure of one actor's pass is a
// *compact.Error naming that actor, and does not stop the others.
func TestNamespace(t *testing.T) {
	b := buckettest.Dir(t)
	rng := mrand.New(mrand.NewPCG(9, 9))
	want := map[string]frames.Seq{}
	var actors []frames.Actor
	for range 2 {
		d := newDB(t, b)
		d.work(rng, 5)
		want[d.actor.Actor] = d.durable()
		actors = append(actors, d.actor)
	}
	ns := actorOf([]byte{1}).Namespace
	opts := testOptions(t)
	opts.Force = true
	results, err := compact.Namespace(t.Context(), b, ns, opts)
	require.NoError(t, err)
	if len(results) != len(want) {
		t.Fatalf("%d results for %d actors", len(results), len(want))
	}
	for _, r := range results {
		if f, ok := want[r.Actor.Actor]; !ok || r.Snapshot != r.Actor.SnapshotKey(1, f) {
			t.Errorf("actor %s: snapshot %q at %d, want one at %d", r.Actor.Actor, r.Snapshot, r.Seq, f)
		}
	}
	var ce *compact.Error
	if _, err := compact.Namespace(t.Context(), b, "not-a-namespace", opts); !errors.As(err, &ce) || ce.Actor != (frames.Actor{}) {
		t.Errorf("a namespace that is not a namespace ID: got %v, want a *compact.Error naming no actor", err)
	}

	damaged := actors[1]
	bad := []byte(`{"epoch":1`)
	_, err = b.Put(t.Context(), damaged.OwnKey(), bytes.NewReader(bad), int64(len(bad)), bucket.Condition{})
	require.NoError(t, err)
	results, err = compact.Namespace(t.Context(), b, ns, opts)
	if len(results) != len(actors) {
		t.Fatalf("%d results for %d actors, with one own.json damaged", len(results), len(actors))
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	require.Len(t, errs, 1, "one own.json damaged: the errors of %v", err)
	require.ErrorAs(t, errs[0], &ce, "one own.json damaged: a *compact.Error naming the actor")
	require.Equal(t, damaged, ce.Actor, "one own.json damaged: a *compact.Error naming the actor")
	require.ErrorIs(t, errs[0], fence.ErrBadRecord, "one own.json damaged: a *compact.Error naming the actor")
	if n := strings.Count(errs[0].Error(), damaged.OwnKey()); n != 1 {
		t.Errorf("%q names %s %d times, want once", errs[0], damaged.OwnKey(), n)
	}
}
