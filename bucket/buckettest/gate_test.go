package buckettest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/require"
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

	require.NoError(t, put(t.Context(), "held/open"), "put through a released gate")
	require.True(t, exists("held/open"), "put through a released gate stored the key")
	g.Hold()
	require.NoError(t, put(t.Context(), "free/k"), "put of a key the gate does not match")
	require.True(t, exists("free/k"), "put of a key the gate does not match stored the key")
	done := make(chan error, 1)
	go func() { done <- put(t.Context(), "held/k") }()
	<-g.Waiting()
	require.False(t, exists("held/k"), "a held put reached the bucket")
	g.Release()
	require.NoError(t, <-done, "held put after Release")
	require.True(t, exists("held/k"), "held put after Release stored the key")

	g.Hold()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-g.Waiting(); cancel() }()
	err := put(ctx, "held/cancelled")
	var be *bucket.Error
	require.ErrorIs(t, err, context.Canceled, "held put whose context ended")
	require.ErrorAs(t, err, &be, "held put whose context ended")
	require.Equal(t, "held/cancelled", be.Key, "held put whose context ended: the key its error names")
	require.False(t, exists("held/cancelled"), "held put whose context ended stored the key")
	g.Release()
	g.Release() // a second Release is harmless
}
