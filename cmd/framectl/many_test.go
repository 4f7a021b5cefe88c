package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// TestManyObjects: ls, verify, restore and compact an actor of 1,100
// batches, more than a listing page: each sees every object.
func TestManyObjects(t *testing.T) {
	const commits = 1100 // one batch each
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), commits)
			objects := commits + 3 // and a snapshot (a manifest), its chunk and own.json
			require.Greater(t, objects, bucket.DefaultPageSize)
			ls := func(args ...string) lsReport {
				t.Helper()
				var rep lsReport
				r := runCLI(t, append([]string{"ls", "--json"}, args...)...).want(t, exitOK)
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "%s", r.stdout)
				require.Len(t, rep.Actors, 1)
				return rep
			}

			rep := ls("--bucket", f.url, "--namespace", testNamespace)
			a := rep.Actors[0]
			require.Equal(t, objects, a.Objects, "ls: objects")
			require.Len(t, a.Sessions, 1)
			require.Equal(t, commits, a.Sessions[0].Batches, "ls: batches")
			require.Equal(t, frames.Seq(commits), a.Sessions[0].LastSeq, "ls: last seq")
			rep = ls(f.actorFlags()...)
			require.Equal(t, commits+1, len(rep.Actors[0].Sessions[0].Objects), "ls --actor: objects of session 1")

			v := jsonOf[verifyReport](t, runCLI(t, append([]string{"verify", "--json"}, f.actorFlags()...)...).want(t, exitOK))
			require.True(t, v.Clean, "verify: %+v", v.Actors)
			require.Equal(t, objects, v.Actors[0].Objects, "verify: objects read")
			require.Equal(t, frames.Seq(commits), v.Actors[0].Seq, "verify: seq reached")

			out := filepath.Join(t.TempDir(), "restored.db")
			runCLI(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitOK)
			wantSameFile(t, f.source, out)

			c := jsonOf[compactReport](t, runCLI(t, append([]string{"compact", "--force", "--json"}, f.actorFlags()...)...).want(t, exitOK))
			require.Equal(t, f.actor.SnapshotKey(1, commits), c.Actors[0].Snapshot, "compact: snapshot")
			require.Equal(t, objects-2, len(c.Actors[0].Deleted), "compact: deleted (all but own.json and the chunk)")
			after := ls(f.actorFlags()...).Actors[0]
			require.Equal(t, 2+after.Chunks, after.Objects, "ls after compact: objects (own.json, the manifest, chunks)")
		})
	}
}
