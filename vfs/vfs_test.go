package vfs_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/session"
	"github.com/framectl/framectl/vfs"
)

// A runtime written against package vfs still builds and runs for this
// release: the deprecated names are the new ones.
func TestDeprecatedNamesStillWork(t *testing.T) {
	b := buckettest.Dir(t)
	db, err := vfs.Open(t.Context(), vfs.Config{Bucket: b, Namespace: "old", Actor: []byte("a"), Epoch: 1,
		Dir: filepath.Join(t.TempDir(), "a"), Mode: vfs.Async})
	require.NoError(t, err)
	defer db.Close(t.Context())
	c, err := db.Conn()
	require.NoError(t, err)
	defer c.Close()
	dbtest.Exec(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES(1)")
	require.NoError(t, db.Durable(t.Context()))
	var st vfs.Stats = db.Stats()
	require.Equal(t, vfs.StartNew, st.Start.From)

	db.Fence()
	err = c.Exec("INSERT INTO t VALUES(2)")
	require.True(t, errors.Is(vfs.Refusal(err), vfs.ErrFenced), "vfs.Refusal of a write after a fence: %v", err)
	require.ErrorIs(t, db.Durable(t.Context()), session.ErrFenced, "one error value under both names")
}
