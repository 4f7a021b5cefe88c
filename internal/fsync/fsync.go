// Package fsync owns making directory entries durable: after a file is
// created, renamed into place or removed, the directory holding it must be
// fsynced too, or a crash can forget the change although the file's own
// bytes were synced. It never touches file contents.
package fsync

import (
	"fmt"
	"os"
	"runtime"
)

// Dir fsyncs the directory dir. Errors name the directory and keep the
// cause (errors.Is(err, fs.ErrNotExist) when it has vanished).
func Dir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for fsync there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err // *fs.PathError names dir already
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
