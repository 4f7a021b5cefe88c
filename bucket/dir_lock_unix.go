//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package bucket

import (
	"errors"
	"os"
	"syscall"
)

// tryLockFile tries to take an exclusive flock(2) on f without waiting;
// busy reports that another holder has it. flock locks belong to the open
// file description, so they exclude other processes and other opens of the
// file in this process alike (fcntl locks would not exclude this process's
// own opens).
func tryLockFile(f *os.File) (busy bool, err error) {
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

func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
