package compact_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/internal/race"
	"github.com/stretchr/testify/require"
)

// TestCompactBesideLiveWriter runs a random workload through a real
// replicated database while two compactors loop over it, and checks after
// every pass of the first that
//
//   - the log past the newest snapshot exceeds the size rule by at most
//     what the writer uploaded while the pass ran, and one batch;
//   - the session replays from the bucket at least to the frame that was
//     durable when the pass started (nothing the writer needs is deleted),
//     and to the same bytes as the database when that frame is a durable
//     point;
//   - the newest durable point past the newest snapshot replays to the
//     database as it was at that point;
//
// and at the end, that the session replays to the final database, and that
// every durable point still reachable from the objects left replays to the
// database as it was then.
func TestCompactBesideLiveWriter(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) { liveRun(t, be.New(t)) })
	}
}

// liveRounds is the writer's number of rounds (1 to 6 commits each); the
// race detector makes SQLite about five times slower.
var liveRounds = map[bool]int{false: 200, true: 120}[race.Enabled]

func liveRun(t *testing.T, b bucket.Bucket) {
	d := newDB(t, b)
	a := d.actor
	orc := newOracle()
	ctx := t.Context()

	var (
		mu       sync.Mutex
		passes   int // passes of the checked compactor
		passCond = sync.NewCond(&mu)
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stats := map[string]int{}
	var statsMu sync.Mutex
	count := func(k string) {
		statsMu.Lock()
		stats[k]++
		statsMu.Unlock()
	}

	// The second compactor only races the first: its passes delete what
	// the first is reading, and write snapshots it must cope with.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := compact.Actor(ctx, b, a, testOptions(t))
			switch {
			case errors.Is(err, compact.ErrRaced):
				count("raced (second)")
			case err != nil:
				t.Errorf("second compactor: %v", err)
				return
			case res.Snapshot != "":
				count("snapshots (second)")
			}
		}
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			mu.Lock()
			passes = -1 // the writer must not wait for passes that will not come
			passCond.Broadcast()
			mu.Unlock()
		}()
		var maxBatch int64
		onePass := func() bool {
			before := d.db.Stats()
			res, err := compact.Actor(ctx, b, a, testOptions(t))
			if errors.Is(err, compact.ErrRaced) {
				count("raced (first)")
				return true
			}
			if err != nil {
				t.Errorf("compactor: %v", err)
				return false
			}
			if res.Snapshot != "" {
				count("snapshots (first)")
			}
			if res.Attempts > 1 {
				count("passes that listed again")
			}
			err = checkPass(ctx, t, b, a, d, orc, res, before.Durable, before.BytesUploaded, &maxBatch)
			switch {
			case errors.Is(err, bucket.ErrNotFound):
				count("checks skipped: the second compactor deleted what they read")
			case err != nil:
				t.Error(err)
				return false
			default:
				count("checked passes")
			}
			return true
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !onePass() {
				return
			}
			mu.Lock()
			passes++
			passCond.Broadcast()
			mu.Unlock()
		}
	}()

	// waitPass waits until a pass that started after this call has ended:
	// the writer keeps writing while passes run, but never runs ahead of
	// the compactor altogether, whatever the scheduling.
	waitPass := func() {
		mu.Lock()
		defer mu.Unlock()
		start := passes
		for passes >= 0 && passes < start+2 {
			passCond.Wait()
		}
	}

	rng := mrand.New(mrand.NewPCG(7, 7))
	for round := range liveRounds {
		d.work(rng, 1+rng.IntN(6))
		if round%4 == 0 {
			f := d.durable()
			orc.record(f, d.image())
		}
		if round%20 == 0 {
			waitPass()
		}
	}
	final := d.durable()
	finalImage := d.image()
	orc.record(final, finalImage)
	waitPass()
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	// One more pass with nobody racing it, then the whole history.
	if _, err := compact.Actor(ctx, b, a, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	got, seq := mustReplay(t, b, a, 1)
	if seq != final {
		t.Fatalf("the session replays to %d, the last durable frame is %d", seq, final)
	}
	dbtest.SameBytes(t, "final replay", got, finalImage)
	for _, f := range orc.seqs() {
		img, _ := orc.get(f)
		got, _, err := replayTo(t, b, a, 1, f)
		if errors.Is(err, errUnreachable) {
			count("durable points compacted away")
			continue
		}
		require.NoError(t, err, "replay to durable point %d", f)
		dbtest.SameBytes(t, fmt.Sprintf("replay to durable point %d", f), got, img)
		count("durable points replayed at the end")
	}
	t.Logf("%d commits, %d durable points: %v", d.db.Stats().Commits, len(orc.seqs()), stats)
	if stats["snapshots (first)"]+stats["snapshots (second)"] < 2 {
		t.Errorf("the compactors wrote %d snapshots: the workload should make the rule fire several times",
			stats["snapshots (first)"]+stats["snapshots (second)"])
	}
	if stats["checked passes"] == 0 {
		t.Error("no pass was checked")
	}
}

// checkPass checks the bucket right after a pass (see
// TestCompactBesideLiveWriter). It returns an error matching
// bucket.ErrNotFound when the second compactor deleted what it read.
func checkPass(ctx context.Context, t *testing.T, b bucket.Bucket, a frames.Actor, d *testDB, orc *oracle,
	res compact.Result, durableBefore frames.Seq, uploadedBefore int64, maxBatch *int64) error {
	st, err := stateErr(ctx, b, a, 1)
	if err != nil {
		return err
	}
	uploaded := d.db.Stats().BytesUploaded - uploadedBefore
	*maxBatch = max(*maxBatch, st.maxBatch)
	var read int64
	hdr, _, err := compact.SnapshotHeader(ctx, b, a, st.newest.Key, frames.Limits{}, &read)
	if err != nil {
		return err
	}
	db := compact.DBBytes(hdr)
	// The pass compacted everything it listed, or found it below the
	// rule; what came after its listing is in uploaded, but for a batch
	// whose upload the writer has not counted yet. With the second
	// compactor writing snapshots too, the database size to compare with
	// is the larger of the two it may have measured against.
	if bound := max(db, res.LeftDBBytes) + *maxBatch; st.logBytes-uploaded >= bound {
		return fmt.Errorf("after a pass the log past snapshot %d is %d bytes, %d of them uploaded during the pass: more than the database (%d bytes) and a batch (%d)",
			st.newest.Seq, st.logBytes, uploaded, max(db, res.LeftDBBytes), *maxBatch)
	}

	got, seq, err := replayTo(t, b, a, 1, 0)
	if err != nil {
		return fmt.Errorf("replaying the newest state: %w", err)
	}
	if seq < durableBefore {
		return fmt.Errorf("the session replays to frame %d, but %d was durable before the pass", seq, durableBefore)
	}
	if img, ok := orc.get(seq); ok && string(got) != string(img) {
		return fmt.Errorf("the replay to durable point %d differs from the database at that point", seq)
	}

	points := orc.seqs()
	for i := len(points) - 1; i >= 0; i-- {
		f := points[i]
		if f < st.newest.Seq || f > seq {
			continue
		}
		got, _, err := replayTo(t, b, a, 1, f)
		if errors.Is(err, errUnreachable) {
			break // the second compactor moved the snapshot past it
		}
		if err != nil {
			return fmt.Errorf("replaying to durable point %d: %w", f, err)
		}
		if img, _ := orc.get(f); string(got) != string(img) {
			return fmt.Errorf("the replay to durable point %d differs from the database at that point", f)
		}
		break
	}
	return nil
}
