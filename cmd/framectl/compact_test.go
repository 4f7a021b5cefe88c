package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompact(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 8)
	batches := f.batches(t)
	first := f.snapshot(t)

	// Retention: everything is younger than an hour, so nothing goes.
	rep := jsonOf[compactReport](t, runCLI(t, append([]string{"compact", "--retention", "1h", "--json"}, f.actorFlags()...)...).want(t, exitOK))
	require.Len(t, rep.Actors, 1, "compact --retention 1h: %+v", rep)
	require.Len(t, rep.Actors[0].Deleted, 0, "compact --retention 1h: %+v", rep)
	require.Equal(t, "1h0m0s", rep.Retention, "compact --retention 1h: %+v", rep)

	// Forced: a snapshot through seq 8, then everything it covers goes.
	r := runCLI(t, "compact", "--bucket", f.url, "--namespace", testNamespace, "--force", "--json").want(t, exitOK)
	rep = jsonOf[compactReport](t, r)
	a := rep.Actors[0]
	require.Equal(t, frames.Epoch(1), a.Epoch, "compact --force: %+v", a)
	require.Equal(t, frames.Seq(8), a.Seq, "compact --force: %+v", a)
	require.Equal(t, f.actor.SnapshotKey(1, 8), a.Snapshot, "compact --force: %+v", a)
	require.Equal(t, "", a.Error, "compact --force: %+v", a)
	deleted := strings.Join(a.Deleted, " ")
	for _, k := range append(batches, first) {
		if !strings.Contains(deleted, k) {
			t.Errorf("compact did not delete %s (deleted %s)", k, deleted)
		}
	}

	// What is left restores to the same database and verifies.
	var ls lsReport
	require.NoError(t, json.Unmarshal([]byte(runCLI(t, append([]string{"ls", "--json"}, f.actorFlags()...)...).want(t, exitOK).stdout), &ls))
	s := ls.Actors[0].Sessions[0]
	assert.Equal(t, 0, s.Batches, "after compaction: %+v", s)
	assert.Equal(t, 1, s.Snapshots, "after compaction: %+v", s)
	assert.Equal(t, frames.Seq(8), s.FirstSeq, "after compaction: %+v", s)
	out := filepath.Join(t.TempDir(), "out.db")
	runCLI(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitOK)
	wantSameFile(t, f.source, out)
	runCLI(t, "verify", "--bucket", f.url).want(t, exitOK)

	// Text: says what it did.
	r = runCLI(t, append([]string{"compact"}, f.actorFlags()...)...).want(t, exitOK)
	contains(t, "compact", r.stdout, "session 1", "not due", "deleted 0 objects", "chunks: deleted 0")

	// The chunks of the snapshot the forced pass replaced are named by no
	// snapshot now, and younger than the grace: kept, and counted.
	rep = jsonOf[compactReport](t, runCLI(t, append([]string{"compact", "--json"}, f.actorFlags()...)...).want(t, exitOK))
	a = rep.Actors[0]
	require.Equal(t, "1h0m0s", rep.Grace)
	if a.ChunksDeleted != 0 || a.ChunksKeptByGrace < 1 {
		t.Fatalf("compact after the forced pass: %d chunks deleted, %d kept; want none deleted, the replaced ones kept", a.ChunksDeleted, a.ChunksKeptByGrace)
	}
}

func TestCompactDamaged(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 5)
	key := f.batches(t)[2]
	damage(t, f.b, key, -6)
	r := runCLI(t, append([]string{"compact", "--force"}, f.actorFlags()...)...).want(t, exitDamage)
	contains(t, "stderr", r.stderr, key)
	contains(t, "stdout", r.stdout, "FAILED")
	// Nothing was deleted: every batch is still there.
	for _, k := range f.batches(t) {
		_, err := f.b.Stat(t.Context(), k)
		assert.NoError(t, err, "a failed pass deleted %s", k)
	}
}

// A pass over a namespace reports each failure on the actor whose pass
// failed, and compacts the others.
func TestCompactNamespaceNamesTheFailedActor(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 5)
	other := frames.Actor{Namespace: testActor.Namespace, Actor: frames.ActorKey([]byte("actor-2"))}
	for _, k := range buckettest.Keys(t, f.b, testActor.Prefix()) {
		data, _, err := bucket.ReadAll(t.Context(), f.b, k, 1<<30)
		require.NoError(t, err)
		dst := other.Prefix() + strings.TrimPrefix(k, testActor.Prefix())
		_, err = f.b.Put(t.Context(), dst, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
		require.NoError(t, err)
	}
	key := f.batches(t)[2]
	damage(t, f.b, key, -6)

	r := runCLI(t, "compact", "--bucket", f.url, "--namespace", testNamespace, "--force", "--json").want(t, exitDamage)
	rep := jsonOf[compactReport](t, r)
	if len(rep.Actors) != 2 || rep.Error == nil || rep.Error.Code != exitDamage {
		t.Fatalf("compact over a namespace with one actor damaged: %+v", rep)
	}
	for _, a := range rep.Actors {
		switch a.Actor {
		case testActor.Actor:
			if a.Error == "" || !strings.Contains(a.Error, key) || a.Snapshot != "" {
				t.Errorf("the damaged actor: %+v, want its error naming %s", a, key)
			}
		case other.Actor:
			if a.Error != "" || a.Snapshot == "" {
				t.Errorf("the sound actor: %+v, want a snapshot and no error", a)
			}
		default:
			t.Errorf("an actor the namespace does not hold: %+v", a)
		}
	}
}

func TestCompactUsage(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 2)
	runCLI(t, "compact", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef").want(t, exitNotFound)
	runCLI(t, "compact", "--bucket", f.url, "--namespace", "nothing-here").want(t, exitNotFound)
	for _, args := range [][]string{
		{"compact", "--bucket", f.url},
		{"compact", "--bucket", f.url, "--namespace", "n", "--retention", "a week"},
		{"compact", "--bucket", f.url, "--namespace", "n", "--retention", "-1h"},
		{"compact", "--bucket", f.url, "--namespace", "n", "--grace", "10s"},
		{"compact", "--namespace", "n"},
	} {
		r := runCLI(t, args...).want(t, exitUsage)
		contains(t, strings.Join(args, " "), r.stderr, "try: framectl compact")
	}
}

func TestCompactSweepLeases(t *testing.T) {
	b := buckettest.Dir(t)
	f := replicate(t, b, 2)
	lease := fence.Lease{Node: "deadbeef", Address: "10.0.0.9:8080"}.Marshal()
	_, err := b.Put(t.Context(), frames.NodeKey("deadbeef"), bytes.NewReader(lease), int64(len(lease)), bucket.Condition{})
	require.NoError(t, err)
	// Young leases stay.
	rep := jsonOf[compactReport](t, runCLI(t, append([]string{"compact", "--sweep-leases", "1h", "--json"}, f.actorFlags()...)...).want(t, exitOK))
	require.Len(t, rep.SweptLeases, 0, "swept a fresh lease")
	// Ages under a minute are refused: they could remove live nodes.
	runCLI(t, append([]string{"compact", "--sweep-leases", "5s"}, f.actorFlags()...)...).want(t, exitUsage)
	// Made old (its file's modification time), it goes.
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(strings.TrimPrefix(f.url, "file://"), "nodes", "deadbeef.json"), old, old))
	rep = jsonOf[compactReport](t, runCLI(t, append([]string{"compact", "--sweep-leases", "1h", "--json"}, f.actorFlags()...)...).want(t, exitOK))
	require.Len(t, rep.SweptLeases, 1, "swept")
	require.Equal(t, frames.NodeKey("deadbeef"), rep.SweptLeases[0], "swept")
}
