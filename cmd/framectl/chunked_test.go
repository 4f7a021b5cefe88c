package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// toManifest replaces the full snapshot at key with a manifest of the same
// state and lineage pred, and returns it.
func toManifest(t *testing.T, b bucket.Bucket, a frames.Actor, key string, pred frames.Lineage) *frames.Manifest {
	t.Helper()
	ctx := t.Context()
	rc, _, err := b.Get(ctx, key)
	require.NoError(t, err)
	defer rc.Close()
	sr, err := frames.NewSnapshotReader(rc, key, frames.Limits{})
	require.NoError(t, err)
	set, err := lanes.LoadSnapshot(ctx, t.TempDir(), sr, key)
	require.NoError(t, err)
	defer set.Close()
	srcs, err := set.Sources()
	require.NoError(t, err)
	h := sr.Header()
	w, err := chunks.Write(ctx, b, a, frames.Manifest{Epoch: h.Epoch, Seq: h.Seq, CommitTime: h.CommitTime, Predecessor: pred}, srcs, nil, chunks.Options{})
	require.NoError(t, err)
	require.Equal(t, key, w.Key)
	return &w.Manifest
}

// TestManifestCommands: ls, inspect, restore and verify read a snapshot
// stored as a manifest, and a missing chunk is damage they name.
func TestManifestCommands(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 6)
			key := f.snapshot(t)
			m := toManifest(t, f.b, f.actor, key, frames.Lineage{})
			require.Len(t, m.Lanes, 1)
			chunk := f.actor.ChunkKey(m.Lanes[0].Chunks[0].Hash)

			r := framectl(t, append([]string{"ls", "--headers", "--json"}, f.actorFlags()...)...).want(t, exitOK)
			var rep lsReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			require.Len(t, rep.Actors, 1)
			require.Equal(t, 1, rep.Actors[0].Chunks)
			require.Empty(t, rep.Unknown)
			found := false
			for _, o := range rep.Actors[0].Sessions[0].Objects {
				if o.Key == key {
					found = true
					require.True(t, o.Manifest, "%+v", o)
					require.Equal(t, 1, o.Chunks)
					require.Equal(t, m.Lanes[0].Bytes(), o.DatabaseBytes)
					require.Nil(t, o.Predecessor)
				}
			}
			require.True(t, found, "ls lists the manifest")
			r = framectl(t, append([]string{"ls", "--headers"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "ls --headers", r.stdout, "manifest of 1 chunks", "1 chunks")

			r = framectl(t, "inspect", "--bucket", f.url, key, "--json").want(t, exitOK)
			var ir inspectReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &ir))
			require.True(t, ir.Verified)
			require.NotNil(t, ir.Snapshot)
			require.NotNil(t, ir.Snapshot.Manifest)
			require.Equal(t, m.Lanes[0].Chunks[0].Hash, ir.Snapshot.Manifest.Lanes[0].Chunks[0].Hash)
			r = framectl(t, "inspect", "--bucket", f.url, key).want(t, exitOK)
			contains(t, "inspect", r.stdout, "manifest: epoch 1", m.Lanes[0].Chunks[0].Hash.String())

			r = framectl(t, "inspect", "--bucket", f.url, chunk, "--json").want(t, exitOK)
			ir = inspectReport{}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &ir))
			require.Equal(t, kindChunk, ir.Kind)
			require.NotNil(t, ir.Chunk)
			require.Equal(t, m.Lanes[0].Chunks[0].Hash, ir.Chunk.Hash)
			require.Equal(t, m.Lanes[0].Bytes(), ir.Chunk.Bytes)

			out := filepath.Join(t.TempDir(), "restored.db")
			framectl(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitOK)
			wantSameFile(t, f.source, out)
			framectl(t, append([]string{"verify"}, f.actorFlags()...)...).want(t, exitOK)

			// The chunk gone: damage, named, for verify and restore alike.
			require.NoError(t, f.b.Delete(t.Context(), chunk))
			r = framectl(t, append([]string{"verify"}, f.actorFlags()...)...).want(t, exitDamage)
			contains(t, "verify", r.stdout+r.stderr, chunk, key)
			r = framectl(t, append([]string{"restore", "--out", filepath.Join(t.TempDir(), "x.db")}, f.actorFlags()...)...).want(t, exitDamage)
			contains(t, "restore", r.stderr, chunk, key)
		})
	}
}
