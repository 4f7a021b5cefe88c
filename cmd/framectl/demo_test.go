package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/assert"
)

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "demo", "--dir", dir, "--commits", "80", "--clients", "4", "--json").want(t, exitOK)
	var rep demoReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	wl := rep.Workload
	if !rep.OK || !rep.Restore.Identical || !rep.Verify.OK || wl.Commits != 80 || rep.Replication.Commits != 80 ||
		wl.Setup+wl.Inserts+wl.Updates+wl.Transfers+wl.Deletes != 80 || rep.Restore.Seq != 80 ||
		rep.Replication.Batches == 0 || rep.Replication.BytesUploaded == 0 || rep.Owner.Epoch != 1 {
		t.Fatalf("demo --json: %+v", rep)
	}
	// Compaction replaced the session's first manifest: the chunks only it
	// named stay until a collector deletes them (none runs yet), and
	// verify calls them strays. Nothing else.
	for _, p := range rep.Verify.Problems {
		k, err := frames.ParseKey(p.Key)
		if err != nil || k.Kind != frames.KeyChunk || p.Kind != "stray" || p.Severity != "warning" {
			t.Errorf("verify found a problem in the demo's bucket: %+v", p)
		}
	}
	assert.Equal(t, "", r.stderr, "demo --json wrote to stderr")
	// The files stay for the operator's next commands, and they work.
	wantSameFile(t, rep.Source, filepath.Join(dir, "restored.sqlite"))
	runCLI(t, "verify", "--bucket", rep.Bucket).want(t, exitOK)
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
