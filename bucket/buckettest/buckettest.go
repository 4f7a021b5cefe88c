// Package buckettest owns what tests put around buckets: real ones (the S3
// server the test script starts, versitygw, and directory buckets on
// temporary directories; each call returns a fresh, empty bucket), Faulty,
// which injects errors, lost responses, latency and stale listings into
// one, Outage, which fails every call while the test keeps it down, Gate,
// which holds chosen uploads until the test lets them go, Counting, which
// counts the requests by operation and kind of key, and Clock, which
// moves only when a test says so; Keys, WaitKeys, Snapshot and Manifest
// read what a bucket holds, failing the test on any error.
//
// It is for tests only (nothing outside a _test.go file imports it), and it
// must never fake a bucket: Faulty, Outage, Gate and Counting wrap a real
// one.
package buckettest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
)

// EnvS3 names the environment variable holding the test S3 bucket URL,
// e.g. s3://test/?endpoint=127.0.0.1:34567&insecure=1 (credentials in the
// usual AWS_* variables). scripts/with-s3.sh sets both.
const EnvS3 = "FRAMECTL_TEST_S3"

// S3 returns the test S3 bucket confined to a prefix of its own, emptied
// (best effort) when the test ends.
//
// Without FRAMECTL_TEST_S3 the test is skipped, or fails when CI=true: CI
// must never pass by skipping the real server.
func S3(t testing.TB) bucket.Bucket {
	t.Helper()
	raw := os.Getenv(EnvS3)
	if raw == "" {
		const why = EnvS3 + " not set: run through ./test.sh or scripts/with-s3.sh to test against a real S3 server (versitygw)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" {
		t.Fatalf("%s=%q: not an s3:// URL", EnvS3, raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + uniquePrefix(t)
	b, err := bucket.Open(t.Context(), u.String())
	if err != nil {
		t.Fatalf("%s: %v", EnvS3, err)
	}
	t.Cleanup(func() { empty(t, b) })
	return b
}

// Dir returns a directory bucket on a new temporary directory.
func Dir(t testing.TB) bucket.Bucket {
	t.Helper()
	b, err := bucket.Open(t.Context(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Backend is a named way to make a fresh bucket.
type Backend struct {
	Name string
	New  func(testing.TB) bucket.Bucket
}

// Backends lists every real backend, for tests that loop over them:
//
//	for _, be := range buckettest.Backends() {
//		t.Run(be.Name, func(t *testing.T) { b := be.New(t); ... })
//	}
func Backends() []Backend {
	return []Backend{
		{Name: "dir", New: Dir},
		{Name: "s3", New: S3},
	}
}

// uniquePrefix is a key prefix no other test run uses: the test's name,
// made key-safe, and random bytes.
func uniquePrefix(t testing.TB) string {
	var sb strings.Builder
	sb.WriteString("test-")
	for _, c := range t.Name() {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			sb.WriteRune(c)
		default:
			sb.WriteByte('_')
		}
		if sb.Len() >= 100 {
			break
		}
	}
	var r [6]byte
	rand.Read(r[:])
	sb.WriteByte('-')
	sb.WriteString(hex.EncodeToString(r[:]))
	return sb.String()
}

// empty deletes every object in b. The test's context is already cancelled
// when cleanups run, so it has its own.
func empty(t testing.TB, b bucket.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []string
	for o, err := range bucket.All(ctx, b, "") {
		if err != nil {
			t.Logf("cleanup of %s: %v", b, err)
			return
		}
		keys = append(keys, o.Key)
	}
	if err := b.DeleteMany(ctx, keys); err != nil {
		t.Logf("cleanup of %s: %v", b, err)
	}
}

// Keys lists every key under prefix in b, in the bucket's order, failing
// the test on any error.
func Keys(t testing.TB, b bucket.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for o, err := range bucket.All(t.Context(), b, prefix) {
		if err != nil {
			t.Fatalf("listing %s in %s: %v", prefix, b, err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// keysGuard bounds WaitKeys: reaching it fails the test as "never
// happened", not as "too slow".
const keysGuard = 90 * time.Second

// WaitKeys waits until the keys under prefix in b are want, in the
// bucket's order (none if want is empty), for what the code under test
// writes or deletes in the background; it fails the test if they never
// are.
func WaitKeys(t testing.TB, b bucket.Bucket, prefix string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(keysGuard)
	for {
		got := Keys(t, b, prefix)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys under %s: %q, want %q", prefix, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
