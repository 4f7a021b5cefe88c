package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
	"github.com/stretchr/testify/require"
)

// Test fixtures: buckets holding a real replicated database, and running
// commands in-process.

const (
	testNamespace = "tests"
	testActorID   = "actor-1"
)

var testActor = frames.Actor{Namespace: frames.NamespaceID("", testNamespace), Actor: frames.ActorKey([]byte(testActorID))}

// fixture is a bucket holding one replicated actor.
type fixture struct {
	b      bucket.Bucket
	url    string
	actor  frames.Actor
	source string // the source database, checkpointed (TRUNCATE) and closed
	inv    *restore.Inventory
}

// replicate writes commits commits to a database replicated to b through
// the VFS, waiting for Durable after each so that every commit is a batch
// of its own (the log then has one batch per frame: deleting one is a gap).
func replicate(t *testing.T, b bucket.Bucket, commits int) *fixture {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	// No background compaction: the tests count and damage specific batches.
	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: testNamespace, Actor: []byte(testActorID), Epoch: 1, Dir: dir, DisableCompaction: true})
	require.NoError(t, err)
	c, err := db.Conn()
	require.NoError(t, err)
	exec := func(sql string) {
		t.Helper()
		require.NoError(t, c.Exec(sql), "%s", sql)
		require.NoError(t, db.Durable(ctx))
	}
	exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	for i := 1; i < commits; i++ {
		if i%3 == 0 {
			exec(fmt.Sprintf("UPDATE t SET v = v || 'x' WHERE id = %d", i/3))
		} else {
			exec(fmt.Sprintf("INSERT INTO t (v) VALUES ('%s')", strings.Repeat("row", i)))
		}
	}
	require.NoError(t, c.Exec("PRAGMA wal_checkpoint(TRUNCATE)"))
	c.Close()
	require.NoError(t, db.Close(ctx))
	f := &fixture{b: b, url: b.String(), actor: testActor, source: db.Path()}
	if f.inv, err = restore.Take(ctx, b, testActor); err != nil {
		t.Fatal(err)
	}
	return f
}

// batches returns the keys of the fixture's batches, in frame order.
func (f *fixture) batches(t *testing.T) []string {
	t.Helper()
	var keys []string
	for _, s := range f.inv.Sessions {
		for _, o := range s.Batches {
			keys = append(keys, o.Key)
		}
	}
	if len(keys) == 0 {
		t.Fatal("the fixture has no batches")
	}
	return keys
}

// snapshot returns the key of the fixture's first snapshot.
func (f *fixture) snapshot(t *testing.T) string {
	t.Helper()
	for _, s := range f.inv.Sessions {
		for _, o := range s.Snapshots {
			return o.Key
		}
	}
	t.Fatal("the fixture has no snapshot")
	return ""
}

// actorFlags are the flags naming the fixture's actor.
func (f *fixture) actorFlags() []string {
	return []string{"--bucket", f.url, "--namespace", testNamespace, "--actor", f.actor.Actor}
}

// damage replaces an object with a copy whose byte at offset i is flipped.
func damage(t *testing.T, b bucket.Bucket, key string, i int) {
	t.Helper()
	data, _, err := bucket.ReadAll(t.Context(), b, key, 1<<30)
	require.NoError(t, err)
	if i < 0 {
		i += len(data)
	}
	data[i] ^= 0x40
	_, err = b.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
	require.NoError(t, err)
}

// result is what a command printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs a framectl command line in-process.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return framectlCtx(t.Context(), args...)
}

func framectlCtx(ctx context.Context, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// want fails the test unless the command exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// jsonOf decodes what a command printed with --json as a T, failing the
// test with the output if it is not one.
func jsonOf[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return v
}

// contains fails the test unless s contains every one of subs.
func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

// wantSameFile fails the test unless the database file got holds the same
// bytes as want.
func wantSameFile(t *testing.T, want, got string) {
	t.Helper()
	x, err := os.ReadFile(want)
	require.NoError(t, err)
	y, err := os.ReadFile(got)
	require.NoError(t, err)
	dbtest.SameBytes(t, filepath.Base(got)+" against "+filepath.Base(want), y, x)
}

// unreachable is an S3 bucket nothing listens for.
const unreachable = "s3://nobucket/?endpoint=127.0.0.1:1&insecure=1"
