package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "demo", "--dir", dir, "--commits", "80", "--clients", "4", "--json").want(t, exitOK)
	rep := jsonOf[demoReport](t, r)
	wl := rep.Workload
	if !rep.OK || !rep.Restore.Identical || !rep.Verify.OK || wl.Commits != 80 || rep.Replication.Commits != 80 ||
		wl.Setup+wl.Inserts+wl.Updates+wl.Transfers+wl.Deletes != 80 || rep.Restore.Seq != 80 ||
		rep.Replication.Batches == 0 || rep.Replication.BytesUploaded == 0 || rep.Owner.Epoch != 1 {
		t.Fatalf("demo --json: %+v", rep)
	}
	// A newcomer's first run finds nothing to warn of. The chunks only a
	// manifest compaction replaced named wait for a later pass (compact's
	// rule 1), and the session closed before one: within the grace, verify
	// counts them and reports nothing.
	assert.Empty(t, rep.Verify.Problems, "verify found problems in the demo's bucket")
	assert.Equal(t, "", r.stderr, "demo --json wrote to stderr")
	// The files stay for the operator's next commands, and they work.
	wantSameFile(t, rep.Source, filepath.Join(dir, "restored.sqlite"))
	r = runCLI(t, "verify", "--bucket", rep.Bucket).want(t, exitOK)
	contains(t, "verify", r.stdout, "clean, 0 warnings")
	r = runCLI(t, "ls", "--bucket", rep.Bucket, "--namespace", "demo", "--actor", rep.ActorKey).want(t, exitOK)
	contains(t, "ls", r.stdout, "own.json: epoch 1, released")

	// The same directory again: a usage error, nothing touched.
	r = runCLI(t, "demo", "--dir", dir).want(t, exitUsage)
	contains(t, "stderr", r.stderr, "already holds a demo")
}

// The text report, on a bucket given by URL (S3 when the test server runs).
func TestDemoText(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			dir := t.TempDir()
			r := runCLI(t, "demo", "--bucket", b.String(), "--dir", dir, "--commits", "40", "--clients", "2").want(t, exitOK)
			contains(t, "demo", r.stdout, "40 commits from 2 clients", "40 commits captured",
				"byte-identical to the source database: yes", "verify      clean", b.String(), "framectl ls --bucket")
			contains(t, "progress", r.stderr, "demo: commits: 100% (40 of 40)")
			noWarning(t, r)
			if _, err := os.Stat(filepath.Join(dir, "bucket")); !os.IsNotExist(err) {
				t.Errorf("demo made a directory bucket although --bucket was given: %v", err)
			}
		})
	}
}

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--commits", "2"},
		{"demo", "--clients", "0"},
		{"demo", "--commits", "many"},
		{"demo", "now"},
		{"demo", "--bucket", "bucket-name"},
	} {
		r := runCLI(t, args...).want(t, exitUsage)
		contains(t, "stderr", r.stderr, "try: framectl demo")
	}
}

// A newcomer's first run, `go run ./cmd/framectl demo` as it is, prints no
// warning. Its 3,000 commits are enough for the session to compact: the
// pass replaces the session's first manifest, and the chunks only that one
// named wait for a later pass, which a session closed a moment later never
// runs. Within the grace they are no problem, and verify says nothing.
func TestDemoFirstRunIsClean(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "demo", "--dir", dir).want(t, exitOK)
	contains(t, "demo", r.stdout, "verify      clean: ")
	noWarning(t, r)
	r = runCLI(t, "verify", "--bucket", "file://"+filepath.Join(dir, "bucket"), "--json").want(t, exitOK)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Zero(t, rep.Warnings, "%+v", rep)
	for _, a := range rep.Actors {
		t.Logf("actor %s: %d chunks no manifest names, within the grace", a.Actor, a.ChunksWithinGrace)
	}
}

// noWarning fails the test for every line of the demo's output that warns.
func noWarning(t *testing.T, r result) {
	t.Helper()
	for _, l := range strings.Split(r.stdout+r.stderr, "\n") {
		if strings.Contains(strings.ToLower(l), "warning") {
			t.Errorf("the demo printed a warning: %s", l)
		}
	}
}
