package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
)

// sessionManifest reads the first snapshot of session epoch, which must be
// a manifest.
func sessionManifest(t *testing.T, b bucket.Bucket, a frames.Actor, epoch frames.Epoch) *frames.Manifest {
	t.Helper()
	keys := buckettest.Keys(t, b, a.SnapshotSessionPrefix(epoch))
	require.NotEmpty(t, keys, "session %d has no snapshot", epoch)
	return buckettest.Manifest(t, b, keys[len(keys)-1]) // descending: the oldest last
}

// Every session starts with a manifest naming where it started: nothing
// for a new database, the session and seq its local copy continued for a
// reused one, the session restored for a restored one. A session that
// restored a manifest with nothing after it uploads no chunk.
func TestSessionManifestLineage(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			cfg := replTestConfig(t, b)
			db, c := reopen(t, cfg, 1)
			createRows(t, c, 300)
			require.NoError(t, db.Durable(t.Context()))
			end1 := db.Stats().Durable
			closeDB(t, db, c)
			a := db.actor
			m1 := sessionManifest(t, b, a, 1)
			assert.Equal(t, frames.Lineage{}, m1.Predecessor, "a new database")

			db2, c2 := reopen(t, cfg, 2)
			require.Equal(t, StartReused, db2.Stats().Start.From)
			m2 := sessionManifest(t, b, a, 2)
			assert.Equal(t, frames.Lineage{Epoch: 1, Seq: end1}, m2.Predecessor)
			assert.Equal(t, end1, m2.Seq)
			closeDB(t, db2, c2)

			// Another directory: nothing local, so it restores session 2,
			// whose manifest holds its whole state.
			other := cfg
			other.Dir = t.TempDir()
			db3, c3 := reopen(t, other, 3)
			st := db3.Stats().Start
			require.Equal(t, StartRestored, st.From)
			assert.Equal(t, 0, st.ChunksUploaded, "a restored manifest's chunks are in the bucket")
			assert.Equal(t, len(m2.Lanes[0].Chunks), st.ChunksShared)
			m3 := sessionManifest(t, b, a, 3)
			assert.Equal(t, frames.Lineage{Epoch: 2, Seq: end1}, m3.Predecessor)
			assert.Equal(t, m2.Lanes, m3.Lanes, "the same state, the same chunks")
			if n := countRows(t, c3); n != 300 {
				t.Errorf("%d rows after the restore, want 300", n)
			}
		})
	}
}

// A session that keeps unacknowledged commits continues the bucket's
// newest state: its lineage names the seq the bucket holds, not the kept
// commits, which are its own.
func TestKeptCommitsLineage(t *testing.T) {
	b := buckettest.Dir(t)
	cfg, _ := unackedCrash(t, b)
	cfg.Unacknowledged = KeepUnacknowledged
	db, _ := reopen(t, cfg, 2)
	require.Equal(t, StartKept, db.Stats().Start.From)
	m := sessionManifest(t, b, db.actor, 2)
	// Rows 1..10 are commits 2..11 (commit 1 created the table).
	assert.Equal(t, frames.Lineage{Epoch: 1, Seq: 11}, m.Predecessor)
	assert.Equal(t, frames.Seq(16), m.Seq)
}

// k chunks' worth of pages changed in a session: the next wake uploads
// about those chunks, not the database, and reads no other chunk.
func TestWakeUploadsWhatChanged(t *testing.T) {
	b := buckettest.Dir(t)
	cfg := replTestConfig(t, b)
	db, c := reopen(t, cfg, 1)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
	// About 4 MiB: sixteen chunks.
	dbtest.Exec(t, c, "INSERT INTO t(v) SELECT randomblob(1000) FROM generate_series(1, 4000)")
	closeDB(t, db, c)
	db, c = reopen(t, cfg, 2)
	total := db.Stats().Start.ChunksUploaded + db.Stats().Start.ChunksShared
	require.GreaterOrEqual(t, total, 16)
	// Rows 1000..1299: about 300 KiB of contiguous pages, two chunks.
	dbtest.Exec(t, c, "UPDATE t SET v = randomblob(1000) WHERE id BETWEEN 1000 AND 1299")
	closeDB(t, db, c)
	db, _ = reopen(t, cfg, 3)
	st := db.Stats().Start
	assert.Equal(t, total, st.ChunksUploaded+st.ChunksShared)
	if st.ChunksUploaded < 1 || st.ChunksUploaded > 3 {
		t.Errorf("%d chunks uploaded after rewriting about 300 KiB of rows, want 2 or so", st.ChunksUploaded)
	}
	if st.SnapshotBytes > 1<<20 {
		t.Errorf("the wake uploaded %d bytes after rewriting about 300 KiB", st.SnapshotBytes)
	}
	// It read only the chunks that changed: the tracker's fingerprints of
	// the others matched the manifest's.
	assert.Equal(t, total-st.ChunksUploaded, st.ChunksUnread, "chunks named without reading them")
}
