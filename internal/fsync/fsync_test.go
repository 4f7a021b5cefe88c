package fsync

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDir(t *testing.T) {
	require.NoError(t, Dir(t.TempDir()))
	missing := filepath.Join(t.TempDir(), "gone")
	err := Dir(missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "Dir(%s)", missing)
}
