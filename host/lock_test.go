package host

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
)

// A second process on a data directory another process's host uses is
// refused (ErrLocked); once that process died, the directory is free.
func TestDataDirectoryRefusesSecondProcess(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	dir := t.TempDir()
	c := startChild(t, b, dir, "x")
	_, err := New(ctx, testConfig(t, b, "127.0.0.1:1", Config{Dir: dir}))
	require.ErrorIs(t, err, ErrLocked)
	c.kill()
	newHost(t, b, Config{Dir: dir})
}
