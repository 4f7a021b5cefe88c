//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package bucket

import (
	"io/fs"
	"syscall"
)

// oNoFollow makes Get refuse a symbolic link at a key's path, as Stat and
// List do: the bucket never creates links, so one is not an object.
const oNoFollow = syscall.O_NOFOLLOW

// inode returns the file's inode number, part of a directory bucket ETag.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
