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
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if _, ok := b.(*bucket.S3); !ok {
			t.Fatalf("%s: a %T", c.in, b)
		}
		if got := b.String(); got != c.want {
			t.Errorf("%s: String %q, want %q", c.in, got, c.want)
		}
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
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		d, ok := b.(*bucket.Dir)
		if !ok {
			t.Fatalf("%s: a %T", in, b)
		}
		if fi, err := os.Stat(d.Root()); err != nil || !fi.IsDir() {
			t.Fatalf("%s: root %s not created: %v", in, d.Root(), err)
		}
		// The URL it prints opens the same directory.
		again, err := bucket.Open(t.Context(), b.String())
		if err != nil || again.(*bucket.Dir).Root() != d.Root() {
			t.Fatalf("%s: String %q reopens as %v %v", in, b.String(), again, err)
		}
	}
	t.Chdir(parent)
	b, err := bucket.Open(t.Context(), "./rel/dir")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.(*bucket.Dir).Root(), filepath.Join(parent, "rel", "dir"); got != want {
		// t.TempDir may be reached through a symlink; compare resolved paths.
		g, _ := filepath.EvalSymlinks(got)
		w, _ := filepath.EvalSymlinks(want)
		if g != w {
			t.Fatalf("relative path opened %s, want %s", got, want)
		}
	}
}

func TestOpenBadURLs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
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
	if _, err := bucket.Open(t.Context(), "file://"+file); err == nil {
		t.Error("a regular file opened as a directory bucket")
	}
}

// OpenExisting never creates a bucket: a missing directory is ErrNoBucket
// naming it, and opening one that exists writes nothing in it (no reserved
// directory, no removal of stale temporary files) until the first Put.
func TestOpenExisting(t *testing.T) {
	ctx := t.Context()
	parent := t.TempDir()
	missing := filepath.Join(parent, "typo", "bucket")
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"file://" + missing, missing, "file://" + filepath.Join(file, "sub")} {
		_, err := bucket.OpenExisting(ctx, in)
		var e *bucket.Error
		if !errors.Is(err, bucket.ErrNoBucket) || !errors.As(err, &e) || e.Op != "open" || !strings.HasPrefix(e.Key, parent) {
			t.Fatalf("%s: %v, want ErrNoBucket naming the directory", in, err)
		}
	}
	if ents, err := os.ReadDir(parent); err != nil || len(ents) != 1 {
		t.Fatalf("OpenExisting created something in %s: %v %v", parent, ents, err)
	}
	if _, err := bucket.OpenExisting(ctx, "file://"+file); err == nil || errors.Is(err, bucket.ErrNoBucket) {
		t.Fatalf("a regular file: %v, want an error other than ErrNoBucket", err)
	}
	if _, err := bucket.OpenExisting(ctx, "mybucket/prefix"); !errors.Is(err, bucket.ErrBadURL) {
		t.Fatalf("bad URL: %v", err)
	}

	// An existing directory that was never a bucket: readable, unchanged.
	root := filepath.Join(parent, "empty")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := bucket.OpenExisting(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	if p := listPage(t, b, "", "", 0); len(p.Objects) != 0 {
		t.Fatalf("list: %+v", p.Objects)
	}
	_, err = b.Stat(ctx, "k")
	wantErr(t, err, bucket.ErrNotFound, "stat", "k")
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Fatalf("reading through OpenExisting wrote %v %v", ents, err)
	}
	// Writes still work: the first one creates the reserved directory.
	put(t, b, "a/k", "v")
	if got, _ := mustGet(t, b, "a/k"); got != "v" {
		t.Fatalf("a/k: %q", got)
	}

	// A bucket with a stale temporary file: OpenExisting leaves it, NewDir
	// (a writer) removes it.
	stale := filepath.Join(root, bucket.ReservedName, "tmp", "put-old")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, long, long); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.OpenExisting(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("OpenExisting removed a temporary file: %v", err)
	}
	if _, err := bucket.NewDir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("NewDir kept a stale temporary file: %v", err)
	}

	// s3:// is unchanged: no request, the same bucket as Open.
	s, err := bucket.OpenExisting(ctx, "s3://bkt/p?endpoint=127.0.0.1:1&insecure=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*bucket.S3); !ok || s.String() != "s3://bkt/p?endpoint=127.0.0.1:1&insecure=1" {
		t.Fatalf("s3: %T %s", s, s)
	}
}
