package capture

import (
	"os"
	"testing"

	"github.com/framectl/framectl/internal/dbtest"
)

// TestCaptureWALMode: through the capture VFS an attached database really
// runs in WAL mode (SharedMemory forwarded), with a -shm wal-index, or with
// a heap wal-index and no -shm under locking_mode=EXCLUSIVE, and its
// commits are captured.
func TestCaptureWALMode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exclusive bool
	}{{"shared", false}, {"exclusive", true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, name, s, path := capSetupWith(t, 4096, "")
			if tc.exclusive {
				os.Remove(path + "-shm")
			}

			c := capOpen(t, name, path)
			if tc.exclusive {
				dbtest.Exec(t, c, "PRAGMA locking_mode=EXCLUSIVE")
			}
			if m := dbtest.Query1(t, c, "PRAGMA journal_mode"); m != "wal" {
				t.Fatalf("PRAGMA journal_mode = %q, want wal", m)
			}
			if m := dbtest.Query1(t, c, "PRAGMA journal_mode=WAL"); m != "wal" {
				t.Fatalf("PRAGMA journal_mode=WAL = %q, want wal", m)
			}
			dbtest.Exec(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES(1)")
			if _, err := os.Stat(path + "-wal"); err != nil {
				t.Errorf("no WAL file after a commit: %v", err)
			}
			_, err := os.Stat(path + "-shm")
			if shm := err == nil; shm == tc.exclusive {
				t.Errorf("-shm exists: %v, want %v", shm, !tc.exclusive)
			}
			if n := s.count(); n != 2 {
				t.Errorf("captured %d commits, want 2", n)
			}
			s.check(t)
		})
	}
}
