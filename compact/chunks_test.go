package compact_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
)

// bigSession replicates a database of about 2 MiB (1 KiB pages: eight
// chunks of 256 KiB), then opens session 2 on it: its first manifest names
// every chunk.
func bigSession(t *testing.T, b bucket.Bucket) *testDB {
	t.Helper()
	return rowsSession(t, b, 2000)
}

// rowsSession replicates a table of rows rows of 900 random bytes (one to
// a 1 KiB page) in session 1, then opens session 2 on it.
func rowsSession(t *testing.T, b bucket.Bucket, rows int) *testDB {
	t.Helper()
	dir, id := t.TempDir(), newActorID()
	d := openDB(t, b, dir, id, 1)
	d.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
	d.exec(fmt.Sprintf("INSERT INTO t(b) SELECT randomblob(900) FROM generate_series(1, %d)", rows))
	d.durable()
	d.close()
	return openDB(t, b, dir, id, 2)
}

// firstSnapshot returns the key of the snapshot session epoch of a starts
// with.
func firstSnapshot(t *testing.T, b bucket.Bucket, a frames.Actor, epoch frames.Epoch) string {
	t.Helper()
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	s, ok := inv.Session(epoch)
	require.True(t, ok, "no session %d", epoch)
	require.NotEmpty(t, s.Snapshots, "session %d has no snapshot", epoch)
	return s.Snapshots[0].Key
}

// A pass over a session whose snapshot is a manifest writes a manifest
// that shares every chunk the log did not change, carries the session's
// lineage, and uploads only the changed chunks.
func TestCompactionUploadsOnlyChangedChunks(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := bigSession(t, b)
			a := d.actor
			base := buckettest.Manifest(t, b, firstSnapshot(t, b, a, 2))
			require.GreaterOrEqual(t, len(base.Lanes[0].Chunks), 8)
			require.Equal(t, frames.Epoch(1), base.Predecessor.Epoch)

			// Rows 1000..1100: about 100 KiB of contiguous pages.
			d.exec("UPDATE t SET b = randomblob(900) WHERE id BETWEEN 1000 AND 1100")
			last := d.durable()
			img := d.image()
			opts := testOptions(t)
			opts.Force = true
			res := mustCompact(t, b, a, opts)
			require.Equal(t, a.SnapshotKey(2, last), res.Snapshot)
			m := buckettest.Manifest(t, b, res.Snapshot) // a manifest's session gets manifests
			require.Equal(t, base.Predecessor, m.Predecessor, "the lineage is the session's")
			have := chunks.HaveOf(base)
			shared := 0
			for _, c := range m.Lanes[0].Chunks {
				if _, ok := have[c.Hash]; ok {
					shared++
				}
			}
			changed := len(m.Lanes[0].Chunks) - shared
			if changed < 1 || changed > 2 {
				t.Errorf("%d of %d chunks changed after rewriting about 100 KiB of rows, want 1 or 2", changed, len(m.Lanes[0].Chunks))
			}
			if max := int64(changed) * (frames.DefaultChunkBytes + 4<<10); res.BytesWritten > max {
				t.Errorf("the pass wrote %d bytes: more than %d changed chunks and a manifest", res.BytesWritten, changed)
			}
			got, seq := mustReplay(t, b, a, 2)
			require.Equal(t, last, seq)
			dbtest.SameBytes(t, "replay of the compacted session", got, img)
		})
	}
}

// The tier pass and retention delete manifests and batches, never chunks:
// a chunk only a deleted manifest named stays until it is older than the
// grace (TestCollectChunks), and verify calls it a stray, not damage.
func TestPassesLeaveYoungChunksAlone(t *testing.T) {
	b := buckettest.Dir(t)
	d := bigSession(t, b)
	a := d.actor
	d.exec("UPDATE t SET b = randomblob(900)") // every chunk changes
	d.durable()
	img := d.image()
	d.close()
	before := buckettest.Keys(t, b, a.ChunkPrefix())
	opts := testOptions(t)
	opts.Force = true
	res := mustCompact(t, b, a, opts)
	require.NotEmpty(t, res.Snapshot)
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	require.Len(t, inv.Sessions, 1, "the tier pass deleted session 1")
	require.Len(t, inv.Sessions[0].Snapshots, 1, "the first manifest of session 2 is covered")
	after := buckettest.Keys(t, b, a.ChunkPrefix())
	require.Subset(t, after, before, "no chunk deleted")
	require.Greater(t, len(after), len(before), "the new manifest's chunks")
	for _, k := range res.Deleted {
		pk, err := frames.ParseKey(k)
		require.NoError(t, err)
		require.NotEqual(t, frames.KeyChunk, pk.Kind, "deleted %s", k)
	}

	rep, err := restore.Verify(t.Context(), b, a, restore.VerifyOptions{ScratchDir: t.TempDir()})
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Problems)
	strays := 0
	for _, p := range rep.Problems {
		if pk, err := frames.ParseKey(p.Key); err == nil && pk.Kind == frames.KeyChunk {
			require.Equal(t, restore.KindStray, p.Kind, "%s", p)
			strays++
		}
	}
	require.Positive(t, strays, "the chunks no manifest names any more")
	got, _ := mustReplay(t, b, a, 2)
	dbtest.SameBytes(t, "replay", got, img)
}

// A session whose snapshot is a full snapshot (a bucket written before
// manifests) is compacted into a full snapshot: no manifest claims a
// lineage nothing recorded.
func TestCompactionOfAFullSnapshotSession(t *testing.T) {
	b := buckettest.Dir(t)
	d := newDB(t, b)
	a := d.actor
	d.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
	d.exec("INSERT INTO t(b) SELECT randomblob(900) FROM generate_series(1, 300)")
	last := d.durable()
	img := d.image()
	d.close()
	key := firstSnapshot(t, b, a, 1)
	toFullSnapshot(t, b, a, key)
	require.Nil(t, buckettest.Snapshot(t, b, key))

	opts := testOptions(t)
	opts.Force = true
	res := mustCompact(t, b, a, opts)
	require.Equal(t, a.SnapshotKey(1, last), res.Snapshot)
	require.Nil(t, buckettest.Snapshot(t, b, res.Snapshot), "a full snapshot")
	got, _ := mustReplay(t, b, a, 1)
	dbtest.SameBytes(t, "replay", got, img)
}

// toFullSnapshot rewrites the manifest at key as a full snapshot of the
// same state, as framectl wrote snapshots before manifests.
func toFullSnapshot(t *testing.T, b bucket.Bucket, a frames.Actor, key string) {
	t.Helper()
	m := buckettest.Manifest(t, b, key)
	set, _, err := chunks.Load(t.Context(), b, a, key, m, t.TempDir(), chunks.Options{})
	require.NoError(t, err)
	defer set.Close()
	var buf bytes.Buffer
	_, err = set.WriteSnapshot(t.Context(), &buf, m.Epoch, frames.WriteOptions{})
	require.NoError(t, err)
	_, err = b.Put(t.Context(), key, &buf, int64(buf.Len()), bucket.Condition{})
	require.NoError(t, err)
}
