//go:build unix

package dirlock

import (
	"errors"
	"path/filepath"
	"testing"
)

// A held lock refuses a second Lock in the same process (flock locks belong
// to the open file), naming the lock file; after unlock it is free.
func TestLockRefusesSecondLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(dir, "x.lock")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir, "x.lock")
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Path != filepath.Join(dir, "x.lock") {
		t.Fatalf("second Lock: %v, want a *LockedError naming the lock file", err)
	}
	unlock()
	unlock2, err := Lock(dir, "x.lock")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}
