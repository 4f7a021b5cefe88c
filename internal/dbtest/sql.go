package dbtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// Exec runs sql on c or fails the test.
func Exec(t testing.TB, c *sqlite3.Conn, sql string) {
	t.Helper()
	require.NoError(t, c.Exec(sql), "%s", sql)
}

// Query1 returns the first column of sql's first row, "" when there is
// none.
func Query1(t testing.TB, c *sqlite3.Conn, sql string) string {
	t.Helper()
	s, _, err := c.Prepare(sql)
	require.NoError(t, err, "%s", sql)
	defer s.Close()
	if !s.Step() {
		require.NoError(t, s.Err(), "%s", sql)
		return ""
	}
	return s.ColumnText(0)
}

// FileBytes reads a whole file or fails the test.
func FileBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// IntegrityOK copies the database file at path, opens the copy with plain
// SQLite (the "os" VFS) and fails the test unless integrity_check says ok.
func IntegrityOK(t testing.TB, path string) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "check.db")
	require.NoError(t, os.WriteFile(cp, FileBytes(t, path), 0o644))
	c, err := sqlite3.Open("file:" + cp + "?vfs=os")
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "ok", Query1(t, c, "PRAGMA integrity_check"), "integrity_check")
}
