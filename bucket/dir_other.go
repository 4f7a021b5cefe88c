//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package bucket

import (
	"errors"
	"io/fs"
	"os"
)

// The directory bucket's cross-process lock uses open file description
// locks or flock(2). Where there are neither, every write fails rather than
// silently losing the guarantee that conditional writes are exclusive.
var errNoFlock = errors.New("directory bucket: no flock(2) on this platform")

func tryLockFile(*os.File, string) (bool, error) { return false, errNoFlock }
func unlockFile(*os.File, string) error          { return errNoFlock }

func inode(fs.FileInfo) uint64 { return 0 }

const oNoFollow = 0
