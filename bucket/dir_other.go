//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package bucket

import (
	"errors"
	"io/fs"
	"os"
)

// The directory bucket's cross-process lock uses flock(2). Where there is no
// flock, every write fails rather than silently losing the guarantee that
// conditional writes are exclusive.
var errNoFlock = errors.New("directory bucket: no flock(2) on this platform")

func tryLockFile(*os.File) (bool, error) { return false, errNoFlock }
func unlockFile(*os.File) error          { return errNoFlock }

func inode(fs.FileInfo) uint64 { return 0 }

const oNoFollow = 0
