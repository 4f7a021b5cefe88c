package buckettest

import (
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// Snapshot reads the head of the snapshot object at key in b: its
// manifest, or nil for a full snapshot. It fails the test on any error.
func Snapshot(t testing.TB, b bucket.Bucket, key string) *frames.Manifest {
	t.Helper()
	rc, _, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("reading snapshot %s in %s: %v", key, b, err)
	}
	defer rc.Close()
	_, m, err := frames.OpenSnapshot(rc, key, frames.Limits{})
	if err != nil {
		t.Fatalf("opening snapshot %s in %s: %v", key, b, err)
	}
	return m
}

// Manifest reads the manifest at key in b. It fails the test on any
// error, and if the object is a full snapshot.
func Manifest(t testing.TB, b bucket.Bucket, key string) *frames.Manifest {
	t.Helper()
	m := Snapshot(t, b, key)
	if m == nil {
		t.Fatalf("%s in %s is a full snapshot, not a manifest", key, b)
	}
	return m
}
