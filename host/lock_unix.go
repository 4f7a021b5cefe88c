//go:build unix

package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile is the lock of a data directory: the host's, and each actor's.
const lockFile = "host.lock"

// lockDir takes an exclusive flock(2) on dir's lock file until unlock. Two
// processes on one directory would open the same database files under
// two nodes; the second one gets ErrLocked instead. The kernel drops the
// lock when the process dies, so a restart after SIGKILL locks at once.
// flock locks belong to the open file, so a second lock in the same
// process conflicts too.
func lockDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host: locking %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("host: locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
