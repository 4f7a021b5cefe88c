package bucket_test

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
)

// TestS3NoBucket: every operation on a bucket that does not exist is
// ErrNoBucket, Stat included (a HEAD's 404 has no body to say which).
func TestS3NoBucket(t *testing.T) {
	buckettest.S3(t) // skip, or fail on CI, without a server
	u, err := url.Parse(os.Getenv(buckettest.EnvS3))
	require.NoError(t, err)
	u.Host = "framectl-no-such-bucket"
	b, err := bucket.Open(t.Context(), u.String())
	require.NoError(t, err)
	ctx := t.Context()
	_, _, err = b.Get(ctx, "k")
	wantErr(t, err, bucket.ErrNoBucket, "get", "k")
	_, err = b.Stat(ctx, "k")
	wantErr(t, err, bucket.ErrNoBucket, "stat", "k")
	for _, cond := range []bucket.Condition{{}, {IfAbsent: true}, {IfMatch: "x"}} {
		_, err = b.Put(ctx, "k", strings.NewReader("v"), 1, cond)
		wantErr(t, err, bucket.ErrNoBucket, "put", "k")
	}
	_, err = b.List(ctx, "p/", "", 0)
	wantErr(t, err, bucket.ErrNoBucket, "list", "p/")
	wantErr(t, b.Delete(ctx, "k"), bucket.ErrNoBucket, "delete", "k")
	wantErr(t, b.DeleteMany(ctx, []string{"k"}), bucket.ErrNoBucket, "delete", "k")
}

// TestS3Prefix: a bucket URL's prefix confines the keys: they are stored
// under "prefix/", and a sibling key that merely starts with the same
// characters is not part of the bucket.
func TestS3Prefix(t *testing.T) {
	b := buckettest.S3(t)
	u, err := url.Parse(b.String())
	require.NoError(t, err)
	prefix := strings.Trim(u.Path, "/")
	u.Path = "/"
	root, err := bucket.Open(t.Context(), u.String())
	require.NoError(t, err)
	put(t, b, "k", "inside")
	got, _ := mustGet(t, root, prefix+"/k")
	require.Equal(t, "inside", got, "%s/k", prefix)
	put(t, root, prefix+"x", "sibling")
	t.Cleanup(func() { root.Delete(context.Background(), prefix+"x") }) // t.Context is done by now
	if got := keysOf(listAll(t, b, "", "", 0)); len(got) != 1 || got[0] != "k" {
		t.Fatalf("list inside the prefix: %q", got)
	}
	if p := listPage(t, b, "", "", 1); p.More || len(p.Objects) != 1 {
		t.Fatalf("a key outside the prefix made More true: %+v", p)
	}
}

// panicReader fails the test if anything reads it.
type panicReader struct{ t *testing.T }

func (r panicReader) Read([]byte) (int, error) {
	r.t.Error("body read")
	return 0, io.EOF
}

// TestS3PutChecks: arguments refused before any request is made, so it
// runs without a server.
func TestS3PutChecks(t *testing.T) {
	client, err := minio.New("127.0.0.1:1", &minio.Options{Creds: credentials.NewStaticV4("a", "b", "")})
	require.NoError(t, err)
	s, err := bucket.NewS3(client, "bkt", "pre/fix")
	require.NoError(t, err)
	ctx := t.Context()
	_, err = s.Put(ctx, "big", panicReader{t}, bucket.MaxConditionalPutSize+1, bucket.Condition{IfAbsent: true})
	wantErr(t, err, bucket.ErrTooLarge, "put", "big")
	_, err = s.Put(ctx, "short", bytes.NewReader([]byte("abc")), 10, bucket.Condition{})
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "short seekable body")
	// The prefix counts toward the key length limit.
	long := strings.Repeat("k/", bucket.MaxKeyLen)[:bucket.MaxKeyLen-5] // 1,027 bytes with "pre/fix/"
	require.NoError(t, bucket.CheckKey(long), "test key invalid")
	_, err = s.Stat(ctx, long)
	wantErr(t, err, bucket.ErrInvalidKey, "stat", long)
	_, err = bucket.NewS3(client, "bkt", "a//b")
	require.Error(t, err, "NewS3 accepted an invalid prefix")
}

// TestS3RequiredOnCI: without a server the S3 tests skip, except on CI
// (CI=true), where they fail: CI must not pass by skipping.
func TestS3RequiredOnCI(t *testing.T) {
	if os.Getenv("CI") == "true" && os.Getenv(buckettest.EnvS3) == "" {
		t.Skip("this run is itself the CI case")
	}
	run := func(ci string) (string, error) {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestS3Prefix$", "-test.v")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, buckettest.EnvS3+"=") && !strings.HasPrefix(kv, "CI=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("true")
	if err == nil || !strings.Contains(out, "--- FAIL: TestS3Prefix") || !strings.Contains(out, buckettest.EnvS3+" not set") {
		t.Fatalf("CI=true without a server: err %v, output:\n%s", err, out)
	}
	out, err = run("")
	if err != nil || !strings.Contains(out, "--- SKIP: TestS3Prefix") {
		t.Fatalf("without CI and a server: err %v, output:\n%s", err, out)
	}
}
