package compact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
)

// getCounter is a real bucket that records the keys read under a prefix.
type getCounter struct {
	bucket.Bucket
	prefix string

	mu   sync.Mutex
	keys []string
}

func (g *getCounter) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if strings.HasPrefix(key, g.prefix) {
		g.mu.Lock()
		g.keys = append(g.keys, key)
		g.mu.Unlock()
	}
	return g.Bucket.Get(ctx, key)
}

// take returns the keys read since the last take.
func (g *getCounter) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.keys
	g.keys = nil
	return k
}

// objectBytes reads a whole object.
func objectBytes(t *testing.T, b bucket.Bucket, key string) []byte {
	t.Helper()
	rc, _, err := b.Get(t.Context(), key)
	require.NoError(t, err)
	defer rc.Close()
	data, err := io.ReadAll(rc)
	require.NoError(t, err)
	return data
}

// damage flips a byte in the middle of an object.
func damage(t *testing.T, b bucket.Bucket, key string) {
	t.Helper()
	data := objectBytes(t, b, key)
	data[len(data)/2] ^= 0x40
	_, err := b.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
	require.NoError(t, err)
}

// keepAll are pass options that delete nothing (a long retention), so
// that two passes can build the same snapshot from the same objects.
func keepAll(t *testing.T) compact.Options {
	opts := testOptions(t)
	opts.Force = true
	opts.Retention = 1000 * time.Hour
	return opts
}

// TestIncrementalMatchesFullReplay runs random workloads (inserts,
// updates, deletes, growth, shrinking by incremental vacuum and by
// VACUUM) on a session whose snapshot is a manifest, and after each round
// builds the snapshot twice from the same objects: through the chunks the
// log touches (the default) and by loading the base manifest whole
// (compact.FullReplay). The two manifest objects are byte-identical, the
// state they hold is the database's, and the incremental build read fewer
// chunks over the run.
func TestIncrementalMatchesFullReplay(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			inner := be.New(t)
			dir, id := t.TempDir(), newActorID()
			d := openDB(t, inner, dir, id, 1)
			d.exec("PRAGMA auto_vacuum = INCREMENTAL")
			d.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
			d.exec("INSERT INTO t(b) SELECT randomblob(900) FROM generate_series(1, 2500)")
			d.durable()
			d.close()
			d = openDB(t, inner, dir, id, 2)
			a := d.actor
			g := &getCounter{Bucket: inner, prefix: a.ChunkPrefix()}
			rng := mrand.New(mrand.NewPCG(5, 17))
			var lazyGets, fullGets int
			for round := range 8 {
				switch round % 4 {
				case 1: // growth
					d.exec(fmt.Sprintf("INSERT INTO t(b) SELECT randomblob(900) FROM generate_series(1, %d)", 100+rng.IntN(400)))
				case 2: // shrink from the end, by incremental vacuum
					d.exec(fmt.Sprintf("DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY id DESC LIMIT %d)", 200+rng.IntN(300)))
					d.exec("PRAGMA incremental_vacuum")
				case 3: // holes in the middle, then a VACUUM that rewrites and shrinks
					d.exec(fmt.Sprintf("DELETE FROM t WHERE id %% %d = 0", 3+rng.IntN(5)))
					d.exec("VACUUM")
				}
				d.work(rng, 10)
				last := d.durable()
				img := d.image()

				res, err := compact.Actor(t.Context(), g, a, keepAll(t))
				require.NoError(t, err, "round %d", round)
				require.Equal(t, a.SnapshotKey(2, last), res.Snapshot)
				lazyGets += len(g.take())
				lazy := objectBytes(t, inner, res.Snapshot)
				require.NoError(t, inner.Delete(t.Context(), res.Snapshot))

				full, err := compact.Actor(t.Context(), g, a, compact.FullReplay(keepAll(t)))
				require.NoError(t, err, "round %d", round)
				require.Equal(t, res.Snapshot, full.Snapshot)
				fullGets += len(g.take())
				require.Equal(t, objectBytes(t, inner, full.Snapshot), lazy, "round %d: the incremental manifest is the full replay's", round)
				require.LessOrEqual(t, res.BytesRead, full.BytesRead, "round %d", round)

				got, seq := mustReplay(t, inner, a, 2)
				require.Equal(t, last, seq)
				require.True(t, bytes.Equal(img, got), "round %d: the snapshot restores the database", round)
			}
			t.Logf("chunk GETs: incremental %d, full replay %d", lazyGets, fullGets)
			require.Less(t, lazyGets, fullGets)
		})
	}
}

// economySession replicates a database of about 10 MiB (1 KiB pages:
// forty chunks of 256 KiB) in session 1 and opens session 2 on it: its
// first manifest names every chunk.
func economySession(t *testing.T, b bucket.Bucket) *testDB {
	t.Helper()
	return rowsSession(t, b, 10000)
}

// TestIncrementalReadsOnlyTouchedChunks: on a database of many chunks,
// a pass after a few row updates reads only the chunks those rows' pages
// fall in, not the database, and the snapshot it writes restores it.
func TestIncrementalReadsOnlyTouchedChunks(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			inner := be.New(t)
			d := economySession(t, inner)
			a := d.actor
			base := buckettest.Manifest(t, inner, firstSnapshot(t, inner, a, 2))
			require.GreaterOrEqual(t, len(base.Lanes[0].Chunks), 32)

			// Three rows far apart: three leaf pages in three chunks.
			d.exec("UPDATE t SET b = randomblob(900) WHERE id IN (10, 5000, 9990)")
			last := d.durable()
			img := d.image()
			g := &getCounter{Bucket: inner, prefix: a.ChunkPrefix()}
			res := mustCompact(t, g, a, keepAll(t))
			require.Equal(t, a.SnapshotKey(2, last), res.Snapshot)
			read := g.take()
			m := buckettest.Manifest(t, inner, res.Snapshot)
			changed := changedChunks(a, base, m)
			t.Logf("%d chunks, %d changed, %d read", len(base.Lanes[0].Chunks), len(changed), len(read))
			require.NotEmpty(t, changed)
			for _, k := range changed {
				require.Contains(t, read, k, "a changed chunk was read to be changed")
			}
			require.LessOrEqual(t, len(read), 6, "only the touched chunks are read")
			got, seq := mustReplay(t, inner, a, 2)
			require.Equal(t, last, seq)
			require.True(t, bytes.Equal(img, got))
		})
	}
}

// changedChunks returns the keys of base's chunks that m does not name at
// the same place.
func changedChunks(a frames.Actor, base, m *frames.Manifest) []string {
	var out []string
	for i, c := range base.Lanes[0].Chunks {
		if i >= len(m.Lanes[0].Chunks) || m.Lanes[0].Chunks[i].Hash != c.Hash {
			out = append(out, a.ChunkKey(c.Hash))
		}
	}
	return out
}

// TestIncrementalDamage: a touched chunk that is damaged or missing, and
// a damaged batch, fail the pass with an error naming the object, and
// nothing is written; a damaged chunk the log does not touch is not read,
// and the pass succeeds (the chunk is verify's to report).
func TestIncrementalDamage(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			inner := be.New(t)
			d := bigSession(t, inner)
			a := d.actor
			d.exec("UPDATE t SET b = randomblob(900) WHERE id = 1500")
			last := d.durable()
			g := &getCounter{Bucket: inner, prefix: a.ChunkPrefix()}

			// A first pass shows which chunks the log touches.
			res := mustCompact(t, g, a, keepAll(t))
			touched := g.take()
			require.NotEmpty(t, touched)
			require.NoError(t, inner.Delete(t.Context(), res.Snapshot))
			inv, err := restore.Take(t.Context(), inner, a)
			require.NoError(t, err)
			s, _ := inv.Session(2)
			manifestKey := s.Snapshots[0].Key
			base := buckettest.Manifest(t, inner, manifestKey)
			var untouched string
			for _, c := range base.Lanes[0].Chunks {
				if k := a.ChunkKey(c.Hash); !slices.Contains(touched, k) {
					untouched = k
					break
				}
			}
			require.NotEmpty(t, untouched)

			// Damage the chunk the log does not touch: not the pass's
			// business.
			damage(t, inner, untouched)
			res = mustCompact(t, g, a, keepAll(t))
			require.Equal(t, a.SnapshotKey(2, last), res.Snapshot)
			require.NotContains(t, g.take(), untouched)
			require.NoError(t, inner.Delete(t.Context(), res.Snapshot))

			// Damage a touched chunk.
			good := objectBytes(t, inner, touched[0])
			damage(t, inner, touched[0])
			_, err = compact.Actor(t.Context(), g, a, keepAll(t))
			wantChunkError(t, err, manifestKey, touched[0], frames.ErrCorrupt)
			require.Empty(t, stateOf(t, inner, a, 2).snapshots[1:], "nothing written")

			// Missing.
			require.NoError(t, inner.Delete(t.Context(), touched[0]))
			_, err = compact.Actor(t.Context(), g, a, keepAll(t))
			wantChunkError(t, err, manifestKey, touched[0], chunks.ErrMissing)
			_, err = inner.Put(t.Context(), touched[0], bytes.NewReader(good), int64(len(good)), bucket.Condition{})
			require.NoError(t, err)

			// A damaged batch.
			batch := s.Batches[len(s.Batches)-1].Key
			damage(t, inner, batch)
			_, err = compact.Actor(t.Context(), g, a, keepAll(t))
			require.Error(t, err)
			var ce *compact.Error
			require.True(t, errors.As(err, &ce), "%v", err)
			var re *restore.Error
			require.True(t, errors.As(err, &re), "%v", err)
			require.Equal(t, batch, re.Key)
			// The flipped byte is found by the gzip check or, when the frame
			// it lands in is applied first, by the checksum chain.
			require.True(t, errors.Is(err, frames.ErrCorrupt) || errors.Is(err, lanes.ErrChecksum), "%v", err)
			require.Empty(t, stateOf(t, inner, a, 2).snapshots[1:], "nothing written")
		})
	}
}

// wantChunkError checks that err is a *compact.Error about the manifest
// at manifestKey whose cause names chunk and matches target.
func wantChunkError(t *testing.T, err error, manifestKey, chunk string, target error) {
	t.Helper()
	require.Error(t, err)
	var ce *compact.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, manifestKey, ce.Key)
	var che *chunks.Error
	require.True(t, errors.As(err, &che), "%v", err)
	require.Equal(t, chunk, che.Chunk)
	require.ErrorIs(t, err, target)
}
