//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package bucket

import (
	"errors"
	"os"
	"syscall"
)

// Without open file description locks, the key locks fall back to one
// exclusive flock(2) on the whole lock file: correct, but a process
// stopped while it holds it stalls every writer of the bucket (see Locks
// on Dir). flock locks belong to the open file description, so they
// exclude other processes and other opens of the file in this process
// alike (POSIX fcntl locks would not exclude this process's own opens).
func tryLockFile(f *os.File, _ string) (busy bool, err error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return true, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

func unlockFile(f *os.File, _ string) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
