package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
)

// toFullSnapshot rewrites the manifest at key as a full snapshot of the
// same state, as framectl wrote snapshots before manifests.
func toFullSnapshot(t *testing.T, b bucket.Bucket, a frames.Actor, key string) {
	t.Helper()
	ctx := t.Context()
	m := buckettest.Manifest(t, b, key)
	set, _, err := chunks.Load(ctx, b, a, key, m, t.TempDir(), chunks.Options{})
	require.NoError(t, err)
	defer set.Close()
	var buf bytes.Buffer
	_, err = set.WriteSnapshot(ctx, &buf, m.Epoch, frames.WriteOptions{})
	require.NoError(t, err)
	_, err = b.Put(ctx, key, &buf, int64(buf.Len()), bucket.Condition{})
	require.NoError(t, err)
}

// TestManifestCommands: ls, inspect, restore and verify read the snapshot
// a session starts with, a manifest, and a missing chunk is damage they
// name.
func TestManifestCommands(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 6)
			key := f.snapshot(t)
			m := buckettest.Manifest(t, f.b, key)
			require.Len(t, m.Lanes, 1)
			chunk := f.actor.ChunkKey(m.Lanes[0].Chunks[0].Hash)

			r := runCLI(t, append([]string{"ls", "--headers", "--json"}, f.actorFlags()...)...).want(t, exitOK)
			var rep lsReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			require.Len(t, rep.Actors, 1)
			require.Equal(t, 1, rep.Actors[0].Chunks, "a database of one page: one chunk")
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
			r = runCLI(t, append([]string{"ls", "--headers"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "ls --headers", r.stdout, "manifest of 1 chunks", "1 chunks")

			r = runCLI(t, "inspect", "--bucket", f.url, key, "--json").want(t, exitOK)
			var ir inspectReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &ir))
			require.True(t, ir.Verified)
			require.NotNil(t, ir.Snapshot)
			require.NotNil(t, ir.Snapshot.Manifest)
			require.Equal(t, m.Lanes[0].Chunks[0].Hash, ir.Snapshot.Manifest.Lanes[0].Chunks[0].Hash)
			r = runCLI(t, "inspect", "--bucket", f.url, key).want(t, exitOK)
			contains(t, "inspect", r.stdout, "manifest: epoch 1", m.Lanes[0].Chunks[0].Hash.String())

			r = runCLI(t, "inspect", "--bucket", f.url, chunk, "--json").want(t, exitOK)
			ir = inspectReport{}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &ir))
			require.Equal(t, kindChunk, ir.Kind)
			require.NotNil(t, ir.Chunk)
			require.Equal(t, m.Lanes[0].Chunks[0].Hash, ir.Chunk.Hash)
			require.Equal(t, m.Lanes[0].Bytes(), ir.Chunk.Bytes)

			out := filepath.Join(t.TempDir(), "restored.db")
			runCLI(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitOK)
			wantSameFile(t, f.source, out)
			runCLI(t, append([]string{"verify"}, f.actorFlags()...)...).want(t, exitOK)

			// The chunk gone: damage, named, for verify and restore alike.
			require.NoError(t, f.b.Delete(t.Context(), chunk))
			r = runCLI(t, append([]string{"verify"}, f.actorFlags()...)...).want(t, exitDamage)
			contains(t, "verify", r.stdout+r.stderr, chunk, key)
			r = runCLI(t, append([]string{"restore", "--out", filepath.Join(t.TempDir(), "x.db")}, f.actorFlags()...)...).want(t, exitDamage)
			contains(t, "restore", r.stderr, chunk, key)
		})
	}
}
