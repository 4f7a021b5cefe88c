package chunks_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/stretchr/testify/require"
)

// threeLanes is lane 0 of 300 pages of 4 KiB (five chunks, the third a
// copy of the first), lane 1 of 1,100 pages of 512 bytes (three chunks),
// lane 2 empty.
func threeLanes(t *testing.T) []*lane {
	dir := t.TempDir()
	return []*lane{newLane(t, dir, 0, 4096, 300, 1), newLane(t, dir, 1, 512, 1100, 2), newLane(t, dir, 2, 512, 0, 3)}
}

var start = frames.Manifest{Epoch: 5, Seq: 42, CommitTime: 1234, Predecessor: frames.Lineage{Epoch: 4, Seq: 40}}

func TestWriteThenLoad(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			ls := threeLanes(t)
			w, err := chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, chunks.Options{})
			require.NoError(t, err)
			require.Equal(t, testActor.SnapshotKey(5, 42), w.Key)
			require.Equal(t, 7, w.Chunks, "5 + 3 chunks, one of them a copy")
			require.Equal(t, 1, w.Skipped)
			require.Equal(t, int64(64*4096), w.SkippedBytes)
			keys := chunkKeys(t, b)
			require.Len(t, keys, 7)
			var stored int64
			for _, k := range keys {
				info, err := b.Stat(t.Context(), k)
				require.NoError(t, err)
				stored += info.Size
			}
			require.Equal(t, stored, w.ChunkBytes)
			info, err := b.Stat(t.Context(), w.Key)
			require.NoError(t, err)
			require.Equal(t, info.Size, w.ManifestBytes)

			m := buckettest.Manifest(t, b, w.Key)
			require.Equal(t, w.Manifest, *m)
			require.Equal(t, start.Predecessor, m.Predecessor)
			require.Len(t, m.Lanes, 3)
			require.Equal(t, frames.DefaultChunkPages(4096), m.Lanes[0].ChunkPages)
			require.Equal(t, m.Lanes[0].Chunks[0].Hash, m.Lanes[0].Chunks[2].Hash)

			s, got, err := chunks.Load(t.Context(), b, testActor, w.Key, m, t.TempDir(), chunks.Options{})
			require.NoError(t, err)
			defer s.Close()
			checkLoaded(t, s, ls...)
			require.Equal(t, start.Seq, s.Seq())
			require.Equal(t, start.CommitTime, s.CommitTime())
			require.Equal(t, 7, got.Chunks, "every object is read once, the shared one too")
			require.Equal(t, stored, got.Bytes)
		})
	}
}

func TestWriteUploadsOnlyTheChunksThatChanged(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			ls := threeLanes(t)
			w1, err := chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, chunks.Options{})
			require.NoError(t, err)
			before := chunkKeys(t, b)

			// Nothing changed: the manifest alone.
			next := start
			next.Seq = 43
			w2, err := chunks.Write(t.Context(), b, testActor, next, sources(ls...), chunks.HaveOf(&w1.Manifest), chunks.Options{})
			require.NoError(t, err)
			require.Equal(t, 0, w2.Chunks)
			require.Equal(t, 8, w2.Skipped)
			require.Equal(t, w2.ManifestBytes, w2.Uploaded())
			require.Equal(t, before, chunkKeys(t, b))

			// One page in lane 0's second chunk, one in lane 1's first: two
			// chunks.
			ls[0].write(t, 70, bytes.Repeat([]byte{0xab}, 4096))
			ls[1].write(t, 3, bytes.Repeat([]byte{0xcd}, 512))
			next.Seq = 44
			w3, err := chunks.Write(t.Context(), b, testActor, next, sources(ls...), chunks.HaveOf(&w2.Manifest), chunks.Options{})
			require.NoError(t, err)
			require.Equal(t, 2, w3.Chunks)
			require.Equal(t, 6, w3.Skipped)
			after := chunkKeys(t, b)
			require.Len(t, after, len(before)+2)
			require.Subset(t, after, before, "nothing is deleted")

			s, _, err := chunks.Load(t.Context(), b, testActor, w3.Key, buckettest.Manifest(t, b, w3.Key), t.TempDir(), chunks.Options{})
			require.NoError(t, err)
			defer s.Close()
			checkLoaded(t, s, ls...)
		})
	}
}

func TestWriteStoresTheManifestAfterEveryChunk(t *testing.T) {
	r := &recorder{Bucket: buckettest.Dir(t)}
	ls := threeLanes(t)
	w, err := chunks.Write(t.Context(), r, testActor, start, sources(ls...), nil, chunks.Options{Parallelism: 8})
	require.NoError(t, err)
	puts := r.keys()
	require.Len(t, puts, 8)
	require.Equal(t, w.Key, puts[len(puts)-1], "the manifest is the last put")
	for _, k := range puts[:len(puts)-1] {
		require.True(t, isChunkKey(k), "%s", k)
	}

	// A chunk that cannot be stored: no manifest, and the error names
	// both keys.
	b := buckettest.Dir(t)
	victim := testActor.ChunkKey(w.Manifest.Lanes[1].Chunks[1].Hash)
	r = &recorder{Bucket: b, fail: func(k string) bool { return k == victim }}
	_, err = chunks.Write(t.Context(), r, testActor, start, sources(ls...), nil, chunks.Options{})
	require.ErrorIs(t, err, errRefused)
	var ce *chunks.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, w.Key, ce.Manifest)
	require.Equal(t, victim, ce.Chunk)
	_, err = b.Stat(t.Context(), w.Key)
	require.ErrorIs(t, err, bucket.ErrNotFound, "no manifest names a chunk that was not stored")
}

func TestWriteRefusesPagesTheTrackerDoesNotHold(t *testing.T) {
	b := buckettest.Dir(t)
	ls := threeLanes(t)
	// A byte changed behind the tracker's back.
	_, err := ls[1].f.WriteAt([]byte{^ls[1].data[600*512+9]}, 600*512+9)
	require.NoError(t, err)
	_, err = chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, chunks.Options{})
	require.ErrorIs(t, err, lanes.ErrChecksum)
	require.ErrorContains(t, err, "page 601")
	_, err = b.Stat(t.Context(), testActor.SnapshotKey(start.Epoch, start.Seq))
	require.ErrorIs(t, err, bucket.ErrNotFound)
}

func TestWriteRefusesLanesInTheManifest(t *testing.T) {
	m := start
	m.Lanes = []frames.ManifestLane{{}}
	_, err := chunks.Write(t.Context(), buckettest.Dir(t), testActor, m, nil, nil, chunks.Options{})
	require.ErrorIs(t, err, frames.ErrInvalid)
}

// TestLoadRefusesDamagedChunks damages one chunk at a time: each load
// fails naming the manifest and the chunk, and leaves nothing behind.
func TestLoadRefusesDamagedChunks(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			ctx := t.Context()
			ls := threeLanes(t)
			w, err := chunks.Write(ctx, b, testActor, start, sources(ls...), nil, chunks.Options{})
			require.NoError(t, err)
			m := &w.Manifest
			victim := testActor.ChunkKey(m.Lanes[0].Chunks[1].Hash)
			sameSize := testActor.ChunkKey(m.Lanes[0].Chunks[3].Hash)
			shorter := testActor.ChunkKey(m.Lanes[0].Chunks[4].Hash)
			read := func(key string) []byte {
				data, _, err := bucket.ReadAll(ctx, b, key, 1<<30)
				require.NoError(t, err)
				return data
			}
			put := func(key string, data []byte) {
				_, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
				require.NoError(t, err)
			}
			orig := read(victim)
			flipped := slices.Clone(orig)
			flipped[len(flipped)/2] ^= 0x10
			cases := []struct {
				name   string
				damage func()
				want   error
			}{
				{"flip", func() { put(victim, flipped) }, frames.ErrCorrupt},
				{"truncate", func() { put(victim, orig[:len(orig)/2]) }, frames.ErrTruncated},
				{"delete", func() { require.NoError(t, b.Delete(ctx, victim)) }, chunks.ErrMissing},
				{"swap for a chunk of the same size", func() { put(victim, read(sameSize)) }, frames.ErrCorrupt},
				{"swap for a shorter chunk", func() { put(victim, read(shorter)) }, frames.ErrCorrupt},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					c.damage()
					defer put(victim, orig)
					dir := t.TempDir()
					s, _, err := chunks.Load(ctx, b, testActor, w.Key, m, dir, chunks.Options{})
					require.Nil(t, s, "never a database")
					require.ErrorIs(t, err, c.want)
					require.NotErrorIs(t, err, bucket.ErrNotFound, "damage, not an object that vanished")
					var ce *chunks.Error
					require.ErrorAs(t, err, &ce)
					require.Equal(t, w.Key, ce.Manifest)
					require.Equal(t, victim, ce.Chunk)
					require.ErrorContains(t, err, w.Key)
					require.ErrorContains(t, err, victim)
					if c.name == "swap for a chunk of the same size" {
						var mm *frames.KeyMismatchError
						require.ErrorAs(t, err, &mm, "a sound chunk under another chunk's key")
						require.Equal(t, m.Lanes[0].Chunks[3].Hash, mm.Chunk)
					}
					ents, err := os.ReadDir(dir)
					require.NoError(t, err)
					require.Empty(t, ents)
				})
			}
			s, _, err := chunks.Load(ctx, b, testActor, w.Key, m, t.TempDir(), chunks.Options{})
			require.NoError(t, err, "the bucket repaired")
			s.Close()
		})
	}
}

// TestLoadChecksTheLaneChecksum loads a manifest whose chunks are sound
// but whose lane checksum is not theirs: the pages put together are
// checked, not only each chunk.
func TestLoadChecksTheLaneChecksum(t *testing.T) {
	b := buckettest.Dir(t)
	ls := threeLanes(t)
	w, err := chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, chunks.Options{})
	require.NoError(t, err)
	m := w.Manifest
	m.Lanes = slices.Clone(m.Lanes)
	m.Lanes[1].Checksum ^= 1
	dir := t.TempDir()
	s, _, err := chunks.Load(t.Context(), b, testActor, w.Key, &m, dir, chunks.Options{})
	require.Nil(t, s)
	require.ErrorIs(t, err, lanes.ErrChecksum)
	require.ErrorContains(t, err, w.Key)
	require.ErrorContains(t, err, "lane 1")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents)
}

// TestLoadWithABudgetSmallerThanAChunk still loads, one chunk at a time.
func TestLoadWithABudgetSmallerThanAChunk(t *testing.T) {
	b := buckettest.Dir(t)
	ls := threeLanes(t)
	opts := chunks.Options{MaxInflightBytes: 1, Parallelism: 16}
	w, err := chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, opts)
	require.NoError(t, err)
	s, _, err := chunks.Load(t.Context(), b, testActor, w.Key, &w.Manifest, t.TempDir(), opts)
	require.NoError(t, err)
	defer s.Close()
	checkLoaded(t, s, ls...)
}

// TestLoadStopsWhenCancelled leaves nothing behind.
func TestLoadStopsWhenCancelled(t *testing.T) {
	b := buckettest.Dir(t)
	ls := threeLanes(t)
	w, err := chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, chunks.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	_, _, err = chunks.Load(ctx, b, testActor, w.Key, &w.Manifest, dir, chunks.Options{})
	require.ErrorIs(t, err, context.Canceled)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents)
}
