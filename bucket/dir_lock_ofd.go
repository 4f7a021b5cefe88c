//go:build linux

package bucket

import (
	"errors"
	"hash/fnv"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// tryLockFile tries to take key's lock without waiting: an exclusive open
// file description lock (fcntl F_OFD_SETLK, Linux 3.15) on the byte at
// lockOffset(key). busy reports that another holder has it. OFD locks
// belong to the open file description, not the process, so they exclude
// other processes and other opens of the file in this process alike, and
// they are released when the holder dies.
func tryLockFile(f *os.File, key string) (busy bool, err error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: lockOffset(key), Len: 1}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES):
			return true, nil
		case !errors.Is(err, unix.EINTR):
			return false, err
		}
	}
}

func unlockFile(f *os.File, key string) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: lockOffset(key), Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// lockOffset is the byte of the lock file that stands for key: the top 62
// bits of the key's 64-bit FNV-1a hash, so any offset plus the one-byte
// length stays below the largest file offset. The file stays empty: locks
// past its end are allowed. Every process sharing a bucket must agree on
// this function, so it is part of the directory bucket's on-disk protocol.
// Two keys on one byte (odds 2^-62 for a pair) merely wait for each other.
func lockOffset(key string) int64 {
	h := fnv.New64a()
	io.WriteString(h, key)
	return int64(h.Sum64() >> 2)
}
