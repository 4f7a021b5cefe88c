package main

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/require"
)

// The read-only commands never create a bucket: a mistyped file:// URL is
// "not found" (exit 4) with a message naming the directory, and nothing
// appears on disk (not the directory, not restore's --out).
func TestReadOnlyCommandsNeedTheBucket(t *testing.T) {
	parent := t.TempDir()
	missing := filepath.Join(parent, "typo", "bucket")
	u := "file://" + missing
	for _, args := range [][]string{
		{"verify", "--bucket", u},
		{"verify", "--bucket", u, "--json"},
		{"verify", "--bucket", missing, "--namespace", testNamespace},
		{"ls", "--bucket", u},
		{"ls", "--bucket", u, "--namespace", testNamespace, "--actor", testActor.Actor},
		{"restore", "--bucket", u, "--namespace", testNamespace, "--actor", testActor.Actor, "--out", filepath.Join(parent, "out.db")},
		{"restore", "--bucket", u, "--namespace", testNamespace, "--all", "--out", filepath.Join(parent, "all")},
		{"inspect", "--bucket", u, testActor.LogKey(1, 1)},
	} {
		r := runCLI(t, args...).want(t, exitNotFound)
		contains(t, args[0]+" stderr", r.stderr, "framectl "+args[0]+": ", missing, "does not exist", "never creates a bucket")
		if ents, err := os.ReadDir(parent); err != nil || len(ents) != 0 {
			t.Fatalf("%q created %v (%v)", args, ents, err)
		}
	}

	// Writers still create their bucket.
	created := filepath.Join(parent, "new")
	runCLI(t, "compact", "--bucket", "file://"+created, "--namespace", testNamespace)
	if fi, err := os.Stat(created); err != nil || !fi.IsDir() {
		t.Fatalf("compact did not create its bucket: %v", err)
	}
}

// A missing S3 bucket is "not found" too.
func TestNoSuchS3Bucket(t *testing.T) {
	u, err := url.Parse(buckettest.S3(t).String())
	require.NoError(t, err)
	u.Host = "framectl-no-such-bucket"
	r := runCLI(t, "verify", "--bucket", u.String()).want(t, exitNotFound)
	contains(t, "stderr", r.stderr, "framectl verify: ", "bucket does not exist")
}
