//go:build !linux

package bucket

import (
	"os"
	"syscall"
)

// readDir reads the directory at path through os.File.ReadDir. It returns
// no stamps (invalid ones): outside Linux directory listings are not
// cached, so every page reads the directories it walks through.
func readDir(path string) ([]listEntry, dirStamp, dirStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, dirStamp{}, dirStamp{}, err
	}
	defer f.Close()
	raw, err := f.ReadDir(-1)
	if err != nil {
		return nil, dirStamp{}, dirStamp{}, err
	}
	var b entriesBuilder
	for _, e := range raw {
		switch t := e.Type(); {
		case t.IsDir():
			b.add([]byte(e.Name()), true)
		case t.IsRegular():
			b.add([]byte(e.Name()), false)
		}
		// anything else (symbolic links, sockets) was not written by a bucket
	}
	return b.done(), dirStamp{}, dirStamp{}, nil
}

// stampDir returns no stamp: nothing is cached to compare it with.
func stampDir(path string) (dirStamp, error) {
	fi, err := os.Stat(path)
	if err == nil && !fi.IsDir() {
		err = syscall.ENOTDIR
	}
	return dirStamp{}, err
}
