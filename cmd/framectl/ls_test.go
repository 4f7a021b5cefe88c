package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLs(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 6)
			batches := f.batches(t)

			// The whole bucket: one line for the actor.
			r := runCLI(t, "ls", "--bucket", f.url).want(t, exitOK)
			contains(t, "ls", r.stdout, f.actor.Namespace, f.actor.Actor)

			// The namespace, as JSON: the actor's counts.
			r = runCLI(t, "ls", "--bucket", f.url, "--namespace", testNamespace, "--json").want(t, exitOK)
			var rep lsReport
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("ls --json: %v\n%s", err, r.stdout)
			}
			if len(rep.Actors) != 1 || rep.Actors[0].Actor != f.actor.Actor || len(rep.Actors[0].Sessions) != 1 {
				t.Fatalf("ls --json: want one actor %s with one session, got %+v", f.actor.Actor, rep.Actors)
			}
			s := rep.Actors[0].Sessions[0]
			if s.Epoch != 1 || s.Batches != len(batches) || s.Snapshots != 1 || s.LastSeq != 6 {
				t.Errorf("session %+v: want epoch 1, %d batches, 1 snapshot, last seq 6", s, len(batches))
			}
			assert.Equal(t, "", r.stderr, "ls --json wrote to stderr")

			// The namespace by its ID, as ls printed it.
			r = runCLI(t, "ls", "--bucket", f.url, "--namespace-id", f.actor.Namespace).want(t, exitOK)
			contains(t, "ls --namespace-id", r.stdout, f.actor.Actor)

			// One actor: every object's key.
			r = runCLI(t, append([]string{"ls"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "ls --actor", r.stdout, batches...)
			contains(t, "ls --actor", r.stdout, f.snapshot(t), "own.json: epoch 1, released at seq 6", "session 1")

			// With headers: first sequence numbers. Each batch holds one frame.
			r = runCLI(t, append([]string{"ls", "--headers", "--json"}, f.actorFlags()...)...).want(t, exitOK)
			rep = lsReport{}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			n := 0
			for _, o := range rep.Actors[0].Sessions[0].Objects {
				assert.Equal(t, "", o.HeaderError, "%s", o.Key)
				if o.Kind == "batch" {
					n++
					if o.FirstSeq != o.Seq || o.FrameMessages != 1 {
						t.Errorf("%s: seq %d..%d in %d messages, want one frame", o.Key, o.FirstSeq, o.Seq, o.FrameMessages)
					}
				}
			}
			if n != len(batches) {
				t.Errorf("ls --headers listed %d batches, want %d", n, len(batches))
			}
		})
	}
}

// A chunk key names no session: ls counts it for its actor, not among the
// keys it does not know, and the session's counts stay those of its
// batches and snapshots.
func TestLsChunkIsNoSessionObject(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	written := len(buckettest.Keys(t, f.b, f.actor.ChunkPrefix())) // the manifest's
	chunk := f.actor.ChunkKey(frames.SumChunk(nil))
	_, err := f.b.Put(t.Context(), chunk, strings.NewReader("x"), 1, bucket.Condition{})
	require.NoError(t, err)
	r := runCLI(t, append([]string{"ls", "--json"}, f.actorFlags()...)...).want(t, exitOK)
	var rep lsReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Empty(t, rep.Unknown)
	require.Len(t, rep.Actors, 1)
	require.Equal(t, written+1, rep.Actors[0].Chunks)
	require.Len(t, rep.Actors[0].Sessions, 1, "sessions: %+v", rep.Actors[0].Sessions)
	require.Equal(t, frames.Epoch(1), rep.Actors[0].Sessions[0].Epoch)
}

func TestLsNotFound(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	r := runCLI(t, "ls", "--bucket", f.url, "--namespace", "elsewhere").want(t, exitNotFound)
	contains(t, "stderr", r.stderr, "do/"+frames.NamespaceID("", "elsewhere")+"/")
	r = runCLI(t, "ls", "--bucket", f.url, "--namespace", testNamespace, "--actor", "abcdef").want(t, exitNotFound)
	contains(t, "stderr", r.stderr, "abcdef")

	// An empty bucket is not an error: there is nothing in it.
	r = runCLI(t, "ls", "--bucket", buckettest.Dir(t).String()).want(t, exitOK)
	contains(t, "ls", r.stdout, "no actors")
}

func TestLsUsage(t *testing.T) {
	url := buckettest.Dir(t).String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "--bucket is required"},
		{[]string{"ls", "--bucket", "mybucket"}, "invalid bucket URL"},
		{[]string{"ls", "--bucket", url, "--actor", "00"}, "--actor needs --namespace"},
		{[]string{"ls", "--bucket", url, "--namespace", "n", "--actor", "xyz"}, "not an actor key"},
		{[]string{"ls", "--bucket", url, "--namespace-id", "short"}, "not a namespace ID"},
		{[]string{"ls", "--bucket", url, "--namespace", "n", "--namespace-id", frames.NamespaceID("", "n")}, "not both"},
		{[]string{"ls", "--bucket", url, "--headers"}, "needs --actor"},
		{[]string{"ls", "--bucket", url, "--frobnicate"}, "flag provided but not defined"},
		{[]string{"ls", "--bucket", url, "extra"}, "unexpected argument"},
	} {
		r := runCLI(t, tc.args...).want(t, exitUsage)
		contains(t, strings.Join(tc.args, " "), r.stderr, tc.want, "try: framectl ls")
		assert.Equal(t, "", r.stdout, "%v: usage error printed on stdout", tc.args)
	}
	r := runCLI(t, "ls", "-h").want(t, exitOK)
	contains(t, "ls -h", r.stdout, "Examples:", "-headers", "-namespace-id")
}

func TestLsUnreachable(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "ls", "--bucket", unreachable).want(t, exitIO)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "want one line of error, got:\n%s", r.stderr)
}

// Each session shows where it started: session 2 continued session 1 from
// its last seq, session 1 started a new database. restore --to-seq follows
// that lineage into session 1.
func TestLsLineage(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 6)
			ctx := t.Context()
			db, err := framectl.Open(ctx, session.Config{Bucket: f.b, Namespace: testNamespace, Actor: []byte(testActorID), Epoch: 2,
				Dir: t.TempDir(), DisableCompaction: true}) // restores session 1 into an empty directory
			require.NoError(t, err)
			c, err := db.Conn()
			require.NoError(t, err)
			require.NoError(t, c.Exec("INSERT INTO t (v) VALUES ('session 2')"))
			require.NoError(t, c.Close())
			require.NoError(t, db.Close(ctx))

			r := runCLI(t, append([]string{"ls", "--json"}, f.actorFlags()...)...).want(t, exitOK)
			var rep lsReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			ss := rep.Actors[0].Sessions
			require.Len(t, ss, 2)
			require.Equal(t, frames.Epoch(2), ss[0].Epoch)
			require.Equal(t, "continues", ss[0].Lineage)
			require.Equal(t, &lsLineage{Epoch: 1, Seq: 6}, ss[0].Predecessor)
			require.Equal(t, "new", ss[1].Lineage)
			require.Nil(t, ss[1].Predecessor)

			r = runCLI(t, append([]string{"ls"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "ls --actor", r.stdout, "continues session 1 from seq 6", "started a new database")

			out := filepath.Join(t.TempDir(), "old.db")
			r = runCLI(t, append([]string{"restore", "--out", out, "--to-seq", "6"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "restore --to-seq 6", r.stdout, "seq 6")
			wantSameFile(t, f.source, out)
			r = runCLI(t, append([]string{"restore", "--out", out, "--to-seq", "3"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "restore --to-seq 3", r.stdout, "session 1, seq 3")
		})
	}
}

// Where a session's lineage cannot be read, ls says why and goes on: a
// session of full snapshots (written before manifests) never recorded it,
// a manifest that does not decode is damage named on its session, and a
// session whose snapshot is gone has none to read it from.
func TestLsLineageUnknown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, f *fixture, key string)
		want   string // lsSession.Lineage
		text   string
	}{
		{"full snapshot", func(t *testing.T, f *fixture, key string) { toFullSnapshot(t, f.b, f.actor, key) },
			"unrecorded", "lineage not recorded (full snapshots)"},
		{"unreadable manifest", func(t *testing.T, f *fixture, key string) {
			_, err := f.b.Put(t.Context(), key, strings.NewReader("not a snapshot"), 14, bucket.Condition{})
			require.NoError(t, err)
		}, "damaged", "lineage unreadable: "},
		{"no snapshot", func(t *testing.T, f *fixture, key string) { require.NoError(t, f.b.Delete(t.Context(), key)) },
			"", "no snapshot: lineage unknown"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			f := replicate(t, buckettest.Dir(t), 3)
			key := f.snapshot(t)
			tc.damage(t, f, key)

			r := runCLI(t, append([]string{"ls", "--json"}, f.actorFlags()...)...).want(t, exitOK)
			var rep lsReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			require.Len(t, rep.Actors[0].Sessions, 1)
			s := rep.Actors[0].Sessions[0]
			require.Equal(t, tc.want, s.Lineage)
			require.Nil(t, s.Predecessor)
			if tc.want == "damaged" {
				require.Contains(t, s.LineageError, key, "the damage names the manifest")
			} else {
				require.Empty(t, s.LineageError)
			}

			r = runCLI(t, append([]string{"ls"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "ls --actor", r.stdout, "session 1: ", tc.text)
		})
	}
}

// A snapshot listed but deleted before its lineage is read (a compaction
// ran meanwhile) is passed over for the next.
func TestLsLineagePassesOverVanishedSnapshot(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	gone := f.actor.SnapshotKey(1, 999)
	s := &lsSession{Epoch: 1, Objects: []lsObject{
		{Kind: "snapshot", Key: gone, Epoch: 1},
		{Kind: "snapshot", Key: f.snapshot(t), Epoch: 1},
	}}
	require.NoError(t, readLineage(t.Context(), f.b, s))
	require.Equal(t, "new", s.Lineage)
	require.Empty(t, s.LineageError)
}
