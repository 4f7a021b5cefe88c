//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package bucket

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f, waiting for it. flock locks
// belong to the open file description, so they exclude other processes and
// other opens of the file in this process alike (fcntl locks would not
// exclude this process's own opens).
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
