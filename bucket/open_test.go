package bucket_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenS3URLs(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	for _, c := range []struct{ in, want string }{
		{"s3://bkt", "s3://bkt/"},
		{"s3://bkt/", "s3://bkt/"},
		{"s3://bkt/a/b/", "s3://bkt/a/b"},
		{"s3://bkt/a/b?endpoint=127.0.0.1:9000&insecure=1", "s3://bkt/a/b?endpoint=127.0.0.1:9000&insecure=1"},
		{"s3://bkt/p?insecure=0&region=eu-west-1", "s3://bkt/p?region=eu-west-1"},
		{"S3://bkt/p?endpoint=minio.internal", "s3://bkt/p?endpoint=minio.internal"},
	} {
		b, err := bucket.Open(t.Context(), c.in)
		require.NoError(t, err, "%s", c.in)
		if _, ok := b.(*bucket.S3); !ok {
			t.Fatalf("%s: a %T", c.in, b)
		}
		assert.Equal(t, c.want, b.String(), "%s: String", c.in)
	}
}

func TestOpenDirURLs(t *testing.T) {
	parent := t.TempDir()
	for _, in := range []string{
		"file://" + filepath.Join(parent, "a", "new", "dir"),
		"file://localhost" + filepath.Join(parent, "b"),
		filepath.Join(parent, "plain"),
		"file://" + filepath.Join(parent, "with space"),
	} {
		b, err := bucket.Open(t.Context(), in)
		require.NoError(t, err, "%s", in)
		d, ok := b.(*bucket.Dir)
		if !ok {
			t.Fatalf("%s: a %T", in, b)
		}
		if fi, err := os.Stat(d.Root()); err != nil || !fi.IsDir() {
			t.Fatalf("%s: root %s not created: %v", in, d.Root(), err)
		}
		// The URL it prints opens the same directory.
		again, err := bucket.Open(t.Context(), b.String())
		require.NoError(t, err, "%s: String %q reopens as %v", in, b.String(), again)
		require.Equal(t, d.Root(), again.(*bucket.Dir).Root(), "%s: String %q reopens as %v", in, b.String(), again)
	}
	t.Chdir(parent)
	b, err := bucket.Open(t.Context(), "./rel/dir")
	require.NoError(t, err)
	if got, want := b.(*bucket.Dir).Root(), filepath.Join(parent, "rel", "dir"); got != want {
		// t.TempDir may be reached through a symlink; compare resolved paths.
		g, _ := filepath.EvalSymlinks(got)
		w, _ := filepath.EvalSymlinks(want)
		require.Equal(t, w, g, "relative path opened %s, want %s", got, want)
	}
}

func TestOpenBadURLs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, c := range []struct {
		in, says string
	}{
		{"", "not a bucket URL"},
		{"mybucket/prefix", "not a bucket URL"},
		{"s3://", "no bucket name"},
		{"s3:///prefix", "no bucket name"},
		{"s3:bkt", "no bucket name"},
		{"s3://key:secret@bkt/p", "credentials"},
		{"s3://bkt/p?endpoint=http://host:9000", "no scheme"},
		{"s3://bkt/p?endpoint=", "endpoint"},
		{"s3://bkt/p?endpoint=a:1&endpoint=b:2", "2 times"},
		{"s3://bkt/p?endpiont=a:1", `unknown parameter "endpiont"`},
		{"s3://bkt/p?insecure=maybe", "insecure"},
		{"s3://bkt/p?region=us%20east", "region"},
		{"s3://bkt/a//b", "prefix"},
		{"s3://bkt/a/../b", "prefix"},
		{`s3://bkt/a\b`, "prefix"},
		{"s3://-bad-/p", "bucket name"},
		{"s3://ab/p", "bucket name"},
		{"s3://bkt/p#frag", "fragment"},
		{"gs://bkt/p", `unsupported scheme "gs"`},
		{"file:relative/dir", "absolute path"},
		{"file://otherhost/dir", "otherhost"},
		{"file:///tmp/x?create=1", "no user, query"},
		{"file:///", "no directory"},
	} {
		_, err := bucket.Open(t.Context(), c.in)
		if !errors.Is(err, bucket.ErrBadURL) {
			t.Errorf("%q: got %v, want ErrBadURL", c.in, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.says) || !strings.Contains(msg, "s3://BUCKET") {
			t.Errorf("%q: message %q should say %q and show the syntax", c.in, msg, c.says)
		}
	}
	// A path that is a file cannot become a directory bucket.
	_, err := bucket.Open(t.Context(), "file://"+file)
	assert.Error(t, err, "a regular file opened as a directory bucket")
}

// OpenExisting never creates a bucket: a missing directory is ErrNoBucket
// naming it, and opening one that exists writes nothing in it (no reserved
// directory, no removal of stale temporary files) until the first Put.
func TestOpenExisting(t *testing.T) {
	ctx := t.Context()
	parent := t.TempDir()
	missing := filepath.Join(parent, "typo", "bucket")
	file := filepath.Join(parent, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, in := range []string{"file://" + missing, missing, "file://" + filepath.Join(file, "sub")} {
		_, err := bucket.OpenExisting(ctx, in)
		var e *bucket.Error
		if !errors.Is(err, bucket.ErrNoBucket) || !errors.As(err, &e) || e.Op != "open" || !strings.HasPrefix(e.Key, parent) {
			t.Fatalf("%s: %v, want ErrNoBucket naming the directory", in, err)
		}
	}
	ents, err := os.ReadDir(parent)
	require.NoError(t, err, "OpenExisting created something in %s", parent)
	require.Len(t, ents, 1, "OpenExisting created something in %s", parent)
	if _, err := bucket.OpenExisting(ctx, "file://"+file); err == nil || errors.Is(err, bucket.ErrNoBucket) {
		t.Fatalf("a regular file: %v, want an error other than ErrNoBucket", err)
	}
	_, err = bucket.OpenExisting(ctx, "mybucket/prefix")
	require.ErrorIs(t, err, bucket.ErrBadURL, "bad URL")

	// An existing directory that was never a bucket: readable, unchanged.
	root := filepath.Join(parent, "empty")
	require.NoError(t, os.Mkdir(root, 0o755))
	b, err := bucket.OpenExisting(ctx, "file://"+root)
	require.NoError(t, err)
	p := listPage(t, b, "", "", 0)
	require.Len(t, p.Objects, 0, "list")
	_, err = b.Stat(ctx, "k")
	wantErr(t, err, bucket.ErrNotFound, "stat", "k")
	ents, err = os.ReadDir(root)
	require.NoError(t, err, "reading through OpenExisting wrote")
	require.Len(t, ents, 0, "reading through OpenExisting wrote")
	// Writes still work: the first one creates the reserved directory.
	put(t, b, "a/k", "v")
	got, _ := mustGet(t, b, "a/k")
	require.Equal(t, "v", got, "a/k")

	// A bucket with a stale temporary file: OpenExisting leaves it, NewDir
	// (a writer) removes it.
	stale := filepath.Join(root, bucket.ReservedName, "tmp", "put-old")
	require.NoError(t, os.WriteFile(stale, []byte("x"), 0o644))
	long := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(stale, long, long))
	_, err = bucket.OpenExisting(ctx, root)
	require.NoError(t, err)
	_, err = os.Stat(stale)
	require.NoError(t, err, "OpenExisting removed a temporary file")
	_, err = bucket.NewDir(root)
	require.NoError(t, err)
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, fs.ErrNotExist, "NewDir kept a stale temporary file")

	// s3:// is unchanged: no request, the same bucket as Open.
	s, err := bucket.OpenExisting(ctx, "s3://bkt/p?endpoint=127.0.0.1:1&insecure=1")
	require.NoError(t, err)
	if _, ok := s.(*bucket.S3); !ok || s.String() != "s3://bkt/p?endpoint=127.0.0.1:1&insecure=1" {
		t.Fatalf("s3: %T %s", s, s)
	}
}
