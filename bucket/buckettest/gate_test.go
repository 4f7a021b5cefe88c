package buckettest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
)

// TestGate: a held gate keeps matching Puts from the bucket until Release,
// says when one waits, lets others through, and gives up with the context.
func TestGate(t *testing.T) {
	inner := buckettest.Dir(t)
	g := buckettest.NewGate(inner, func(key string) bool { return strings.HasPrefix(key, "held/") })
	put := func(ctx context.Context, key string) error {
		_, err := g.Put(ctx, key, strings.NewReader("x"), 1, bucket.Condition{})
		return err
	}
	exists := func(key string) bool {
		_, err := inner.Stat(t.Context(), key)
		if err != nil && !errors.Is(err, bucket.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	if err := put(t.Context(), "held/open"); err != nil || !exists("held/open") {
		t.Fatalf("put through a released gate: %v", err)
	}
	g.Hold()
	if err := put(t.Context(), "free/k"); err != nil || !exists("free/k") {
		t.Fatalf("put of a key the gate does not match: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- put(t.Context(), "held/k") }()
	<-g.Waiting()
	if exists("held/k") {
		t.Fatal("a held put reached the bucket")
	}
	g.Release()
	if err := <-done; err != nil || !exists("held/k") {
		t.Fatalf("held put after Release: %v", err)
	}

	g.Hold()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-g.Waiting(); cancel() }()
	err := put(ctx, "held/cancelled")
	var be *bucket.Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &be) || be.Key != "held/cancelled" || exists("held/cancelled") {
		t.Fatalf("held put whose context ended: %v", err)
	}
	g.Release()
	g.Release() // a second Release is harmless
}
