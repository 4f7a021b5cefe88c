package restore_test

import (
	"bytes"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/require"
)

// A chunk key parses, and names no session: Take lists it among the
// actor's chunks, never as a snapshot or batch of some epoch, nor as a key
// framectl does not write.
func TestTakeListsChunksApart(t *testing.T) {
	b := buckettest.Dir(t)
	a := frames.Actor{Namespace: frames.NamespaceID("", "inventory"), Actor: "01"}
	chunk := a.ChunkKey(frames.SumChunk(nil))
	for _, k := range []string{chunk, a.LogKey(2, 5), a.SnapshotKey(2, 3)} {
		_, err := b.Put(t.Context(), k, bytes.NewReader([]byte("x")), 1, bucket.Condition{})
		require.NoError(t, err)
	}
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	require.Empty(t, inv.Unknown)
	require.Len(t, inv.Chunks, 1)
	info, err := b.Stat(t.Context(), chunk)
	require.NoError(t, err)
	require.Equal(t, []restore.Chunk{{Key: chunk, Hash: frames.SumChunk(nil), Size: 1, ETag: info.ETag, ModTime: inv.Chunks[0].ModTime}}, inv.Chunks)
	require.Len(t, inv.Sessions, 1, "sessions")
	s := inv.Sessions[0]
	require.Equal(t, frames.Epoch(2), s.Epoch)
	require.Len(t, s.Snapshots, 1, "snapshots")
	require.Len(t, s.Batches, 1, "batches")
}
