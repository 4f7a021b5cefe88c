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
	"github.com/stretchr/testify/require"
)

// TestTierPass: a database opened with epoch 1, closed, and reopened from
// the same directory with epoch 2 (a second session, starting with a
// snapshot). Then, one own.json at a time:
//
//   - damaged: the pass fails naming own.json, nothing is deleted;
//   - epoch 3, a claim whose session has no snapshot yet: nothing is
//     deleted (its claimant may be restoring from session 2);
//   - epoch 1: session 2, newer than the owner's, is left alone;
//   - none, with a window: session 1 is kept while session 2's snapshot is
//     young, and goes once it is old;
//   - epoch 2, and a zombie's batch in session 1 uploaded after the
//     takeover: the batch goes.
//
// Session 2 replays to the database throughout.
func TestTierPass(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			ctx := t.Context()
			dir, id := t.TempDir(), newActorID()
			rng := mrand.New(mrand.NewPCG(5, 5))
			d1 := openDB(t, b, dir, id, 1)
			a := d1.actor
			d1.work(rng, 20)
			d1.durable()
			d1.close()
			d2 := openDB(t, b, dir, id, 2)
			d2.work(rng, 5)
			last := d2.durable()
			img := d2.image()

			all := func() []string { return buckettest.Keys(t, b, a.Prefix()) }
			session := func(epoch frames.Epoch) []string {
				return append(buckettest.Keys(t, b, a.SnapshotSessionPrefix(epoch)), buckettest.Keys(t, b, a.LogSessionPrefix(epoch))...)
			}
			putOwn := func(body []byte) {
				t.Helper()
				_, err := b.Put(ctx, a.OwnKey(), bytes.NewReader(body), int64(len(body)), bucket.Condition{})
				require.NoError(t, err)
			}
			replays := func(when string) {
				t.Helper()
				got, seq := mustReplay(t, b, a, 2)
				require.Equal(t, last, seq, "%s: session 2 replays", when)
				dbtest.SameBytes(t, when+": session 2", got, img)
			}
			s1, s2 := session(1), session(2)
			if len(s1) < 2 || len(s2) < 2 {
				t.Fatalf("sessions 1 and 2 hold %d and %d objects: want a snapshot and batches in each", len(s1), len(s2))
			}
			opts := testOptions(t)

			// Damaged own.json.
			putOwn([]byte(`{"epoch":2,"node":"n1","address":"10.0.0.1:80"`))
			was := all()
			res, err := compact.Actor(ctx, b, a, opts)
			if !errors.Is(err, fence.ErrBadRecord) || !strings.Contains(err.Error(), a.OwnKey()) {
				t.Fatalf("damaged own.json: %v; want fence.ErrBadRecord naming %s", err, a.OwnKey())
			}
			if now := all(); !slices.Equal(now, was) || len(res.Deleted) != 0 {
				t.Fatalf("a pass over a damaged own.json changed the bucket: %v -> %v", was, now)
			}

			// A claim in progress.
			putOwn(fence.Record{Epoch: 3, Node: "n2", Address: "10.0.0.2:80"}.Marshal())
			res, err = compact.Actor(ctx, b, a, opts)
			if err != nil || res.Epoch != 3 || len(res.Deleted) != 0 || !slices.Equal(all(), was) {
				t.Fatalf("own.json at epoch 3 (no snapshot yet): session %d, deleted %v, %v: want nothing done", res.Epoch, res.Deleted, err)
			}

			// The owner is session 1: session 2 is never deleted.
			putOwn(fence.Record{Epoch: 1}.Marshal())
			res, err = compact.Actor(ctx, b, a, opts)
			require.NoError(t, err, "own.json at epoch 1: session")
			require.Equal(t, frames.Epoch(1), res.Epoch, "own.json at epoch 1: session")
			if got := session(2); !slices.Equal(got, s2) {
				t.Fatalf("own.json at epoch 1: session 2 changed: %v -> %v", s2, got)
			}
			replays("own.json at epoch 1")

			// No own.json: session 2 is the newest with a snapshot. Within
			// the window, session 1 stays for point-in-time restores.
			require.NoError(t, b.Delete(ctx, a.OwnKey()))
			clock := buckettest.NewClock(time.Now())
			opts.Retention, opts.Now = time.Hour, clock.Now
			s1 = session(1)
			res, err = compact.Actor(ctx, b, a, opts)
			if err != nil || res.Epoch != 2 || len(res.Deleted) != 0 || res.Retained < len(s1) {
				t.Fatalf("inside the window: session %d, deleted %v, retained %d, %v: want session 1's %d objects kept",
					res.Epoch, res.Deleted, res.Retained, err, len(s1))
			}
			if got := session(1); !slices.Equal(got, s1) {
				t.Fatalf("inside the window session 1 changed: %v -> %v", s1, got)
			}
			clock.Advance(2 * time.Hour)
			res, err = compact.Actor(ctx, b, a, opts)
			require.NoError(t, err, "after the window: session")
			require.Equal(t, frames.Epoch(2), res.Epoch, "after the window: session")
			require.Len(t, session(1), 0, "after the window, session 1 still holds")
			for _, k := range s1 {
				if !slices.Contains(res.Deleted, k) {
					t.Errorf("%s gone but not reported deleted", k)
				}
			}
			replays("after the tier pass")

			// A fenced owner of session 1 uploads after the takeover.
			zombie := a.LogKey(1, 1_000)
			_, err = b.Put(ctx, zombie, strings.NewReader("late"), 4, bucket.Condition{})
			require.NoError(t, err)
			putOwn(fence.Record{Epoch: 2, Node: "n1", Address: "10.0.0.1:80"}.Marshal())
			res, err = compact.Actor(ctx, b, a, testOptions(t))
			if err != nil || !slices.Equal(res.Deleted, []string{zombie}) {
				t.Fatalf("zombie upload: deleted %v, %v; want exactly %s", res.Deleted, err, zombie)
			}
			replays("after the zombie's batch went")
		})
	}
}
