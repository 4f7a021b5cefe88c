package framectl_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/session"
)

// testConfig returns a config for a fresh actor in b (background
// compaction off, quick retries).
func testConfig(t testing.TB, b bucket.Bucket) session.Config {
	id := make([]byte, 8)
	rand.Read(id)
	return session.Config{Bucket: b, Namespace: "test", Actor: id, Epoch: 1, Dir: t.TempDir(), RetryMin: 5e6, RetryMax: 50e6,
		DisableCompaction: true}
}

// openDB opens cfg's database, closed at cleanup.
func openDB(t testing.TB, cfg session.Config) *framectl.DB {
	t.Helper()
	db, err := framectl.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// conn opens a connection to db, closed at cleanup.
func conn(t testing.TB, db *framectl.DB, params ...string) *sqlite3.Conn {
	t.Helper()
	c, err := db.Conn(params...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// heldGate wraps b in a gate that holds every batch upload until Release.
func heldGate(b bucket.Bucket) *buckettest.Gate {
	g := buckettest.NewGate(b, func(key string) bool {
		k, err := frames.ParseKey(key)
		return err == nil && k.Kind == frames.KeyLog
	})
	g.Hold()
	return g
}
