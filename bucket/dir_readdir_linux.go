//go:build linux

package bucket

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// readDir reads the directory at path with getdents64 straight into one
// buffer: os.File.ReadDir allocates an fs.DirEntry and a string per name,
// which for a directory of 100,000 names is most of the cost of a listing
// page (BenchmarkDirList). It returns the entries in the filesystem's order
// and the directory's stamp taken just before and just after the names were
// read.
func readDir(path string) ([]listEntry, dirStamp, dirStamp, error) {
	fd, err := openDirFD(path)
	if err != nil {
		return nil, dirStamp{}, dirStamp{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	before, err := fstampDir(fd)
	if err != nil {
		return nil, dirStamp{}, dirStamp{}, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	bufp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bufp)
	buf := *bufp
	var b entriesBuilder
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, dirStamp{}, dirStamp{}, &fs.PathError{Op: "getdents", Path: path, Err: err}
		}
		if n <= 0 {
			break
		}
		if err := parseDirents(buf[:n], path, &b); err != nil {
			return nil, dirStamp{}, dirStamp{}, err
		}
		b.flush()
	}
	after, err := fstampDir(fd)
	if err != nil {
		return nil, dirStamp{}, dirStamp{}, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	return b.done(), before, after, nil
}

// direntBufs holds getdents buffers: one read of a large directory makes
// many calls, each filling the buffer.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// linux_dirent64 (getdents64(2)): d_ino u64, d_off s64, d_reclen u16,
// d_type u8, then d_name NUL-terminated, padded to d_reclen.
const (
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// parseDirents adds the regular files and directories among the records
// in buf to b. A record of unknown type (DT_UNKNOWN: filesystems that do not
// store types in directories) is typed by lstat.
func parseDirents(buf []byte, dir string, b *entriesBuilder) error {
	for len(buf) > 0 {
		if len(buf) < direntName {
			return &fs.PathError{Op: "getdents", Path: dir, Err: errors.New("short record")}
		}
		reclen := int(binary.NativeEndian.Uint16(buf[direntReclen:]))
		if reclen < direntName || reclen > len(buf) {
			return &fs.PathError{Op: "getdents", Path: dir, Err: errors.New("bad record length")}
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		name := rec[direntName:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		switch rec[direntType] {
		case syscall.DT_DIR:
			b.add(name, true)
		case syscall.DT_REG:
			b.add(name, false)
		case syscall.DT_UNKNOWN:
			fi, err := os.Lstat(filepath.Join(dir, string(name)))
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return err
			case fi.IsDir():
				b.add(name, true)
			case fi.Mode().IsRegular():
				b.add(name, false)
			}
		}
		// anything else (symbolic links, sockets) was not written by a bucket
	}
	return nil
}

func openDirFD(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if !errors.Is(err, syscall.EINTR) {
			return fd, err
		}
	}
}

func fstampDir(fd int) (dirStamp, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return dirStamp{}, err
	}
	return stampOf(&st), nil
}

// stampDir returns the stamp of the directory at path now.
func stampDir(path string) (dirStamp, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return dirStamp{}, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return dirStamp{}, syscall.ENOTDIR
	}
	return stampOf(&st), nil
}

func stampOf(st *syscall.Stat_t) dirStamp {
	return dirStamp{
		valid: true,
		dev:   uint64(st.Dev), ino: uint64(st.Ino), nlink: uint64(st.Nlink), size: int64(st.Size),
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}
}
