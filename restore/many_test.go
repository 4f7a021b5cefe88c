package restore_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// manyBatches is how many batches TestManyObjects writes: more than one
// listing page (bucket.DefaultPageSize) holds.
const manyBatches = 1100

// TestManyObjects: an actor whose current session holds 1,100 batches,
// more than a listing page, so that its snapshot is listed only on the
// second page. Restore reaches the last batch and a frame past the first
// page byte for byte; verify reads every object, and finds damage in a
// batch that only the second page lists.
func TestManyObjects(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			w := newWorkload(t, b, "many", 11, 512)
			w.cfg.Mode = session.Sync // one batch per commit
			w.newSession(2)
			var mid point
			for i := range manyBatches {
				w.exec(i%2, fmt.Sprintf("INSERT INTO t(a, b) VALUES(%d, x'00')", i))
				if i == manyBatches-50 {
					mid = w.durable()
				}
			}
			last := w.durable()
			w.closeDB()

			latest, data := restoreTo(t, b, w.actor, restore.Latest())
			require.Equal(t, frames.Epoch(2), latest.Epoch)
			require.Equal(t, last.seq, latest.Seq)
			dbtest.SameBytes(t, "latest", data, last.data)
			res, data := restoreTo(t, b, w.actor, restore.ToSeq(mid.seq))
			require.Equal(t, mid.seq, res.Seq)
			dbtest.SameBytes(t, fmt.Sprintf("frame %d", mid.seq), data, mid.data)

			inv, err := restore.Take(t.Context(), b, w.actor)
			require.NoError(t, err)
			s, ok := inv.Session(2)
			require.True(t, ok, "session 2 not listed")
			require.GreaterOrEqual(t, len(s.Batches), manyBatches, "session 2's batches listed")
			require.Len(t, s.Snapshots, 1, "session 2's snapshot listed")
			objects := len(buckettest.Keys(t, b, w.actor.Prefix()))
			require.Greater(t, objects, bucket.DefaultPageSize)
			require.Equal(t, len(s.Batches), latest.BatchesApplied+latest.BatchesSkipped, "batches of the plan")

			rep, err := restore.Verify(t.Context(), b, w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
			require.NoError(t, err)
			require.False(t, rep.Damaged(), "damage in a healthy bucket: %v", rep.Problems)
			require.Equal(t, objects, rep.Objects, "objects verified")
			require.Equal(t, last.seq, rep.Seq)

			// Damage a batch that only the second page of a listing shows.
			victim := s.Batches[len(s.Batches)-10].Key
			require.Greater(t, position(t, b, w.actor.Prefix(), victim), bucket.DefaultPageSize)
			data, _, err = bucket.ReadAll(t.Context(), b, victim, 1<<20)
			require.NoError(t, err)
			data[len(data)/2] ^= 0xff
			putObject(t, b, victim, data)
			rep, err = restore.Verify(t.Context(), b, w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
			require.NoError(t, err)
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Key == victim && p.Severity == restore.Damage)
			}
			require.True(t, found, "damage in %s not reported: %v", victim, rep.Problems)
		})
	}
}

// position is key's 1-based place in the listing of prefix.
func position(t *testing.T, b bucket.Bucket, prefix, key string) int {
	t.Helper()
	for i, k := range buckettest.Keys(t, b, prefix) {
		if k == key {
			return i + 1
		}
	}
	t.Fatalf("%s not listed under %s", key, prefix)
	return 0
}

func putObject(t *testing.T, b bucket.Bucket, key string, data []byte) {
	t.Helper()
	_, err := b.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
	require.NoError(t, err)
}
