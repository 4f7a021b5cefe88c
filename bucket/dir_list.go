package bucket

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// List walks the directory tree in the byte order of the keys it holds.
//
// Order. Sorting each directory's names and descending into subdirectories
// in place is not byte order: "a-c" sorts before "a/b" because '-' (0x2d)
// is less than '/' (0x2f), yet the directory "a" sorts before the file
// "a-c". Sorting a directory's entries by name with "/" appended to
// directory names is exact: every key under directory d starts with "d/",
// and no entry name contains '/', so comparing the entries' sort names
// decides the order of all keys below them.
//
// Cost. A subtree whose keys all sort at or before startAfter is skipped
// without being read, so paging through a tree costs about one directory
// read per level per page, not a walk from the start each time. Metadata
// (lstat) is read only for keys that are returned.
func (d *Dir) List(ctx context.Context, prefix, startAfter string, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	if _, err := os.Stat(d.root); err != nil {
		return Page{}, &Error{Op: "list", Key: prefix, Err: d.missing(err)}
	}
	// Keys with the prefix are those in directory keyDir whose first
	// remaining component starts with partial: the prefix may end in the
	// middle of a component ("do/ns/ac").
	cut := strings.LastIndexByte(prefix, '/') + 1
	keyDir, partial := prefix[:cut], prefix[cut:]
	if keyDir != "" && CheckKey(keyDir[:len(keyDir)-1]) != nil {
		return Page{}, nil // no storable key has this prefix
	}
	l := dirLister{ctx: ctx, limit: limit}
	fsDir := filepath.Join(d.root, filepath.FromSlash(keyDir))
	if err := l.walk(fsDir, keyDir, partial, startAfter, true); err != nil && err != errPageFull {
		return Page{}, &Error{Op: "list", Key: prefix, Err: err}
	}
	return Page{Objects: l.out, More: l.more}, nil
}

// errPageFull stops the walk once a key past the page is seen.
var errPageFull = errors.New("page full")

type dirLister struct {
	ctx   context.Context
	limit int
	out   []Info
	more  bool
}

type dirEntry struct {
	name  string
	sort  string // name, plus "/" for a directory
	isDir bool
	ent   fs.DirEntry
}

// walk lists directory fsDir, which holds the keys starting with keyDir
// ("" or ending in "/"), restricted to names starting with partial. While
// after is set, only keys sorting after startAfter are wanted.
func (l *dirLister) walk(fsDir, keyDir, partial, startAfter string, after bool) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(fsDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // no keys here, or removed while we walked
		}
		return err
	}
	raw, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // removed meanwhile, or an object, not a directory
		}
		return err
	}
	ents := make([]dirEntry, 0, len(raw))
	for _, e := range raw {
		name := e.Name()
		if !strings.HasPrefix(name, partial) || (keyDir == "" && name == ReservedName) {
			continue
		}
		switch t := e.Type(); {
		case t.IsDir():
			ents = append(ents, dirEntry{name: name, sort: name + "/", isDir: true, ent: e})
		case t.IsRegular():
			ents = append(ents, dirEntry{name: name, sort: name, ent: e})
		}
		// anything else (symbolic links, sockets) was not written by a bucket
	}
	slices.SortFunc(ents, func(a, b dirEntry) int { return strings.Compare(a.sort, b.sort) })

	for _, e := range ents {
		key := keyDir + e.sort
		if e.isDir {
			sub := after
			if after {
				switch {
				case strings.HasPrefix(startAfter, key):
					// startAfter is inside this subtree: filter within it
				case key < startAfter:
					continue // every key below sorts before startAfter
				default:
					sub = false // every key below sorts after startAfter
				}
			}
			if err := l.walk(filepath.Join(fsDir, e.name), key, "", startAfter, sub); err != nil {
				return err
			}
			continue
		}
		if after && key <= startAfter {
			continue
		}
		fi, err := e.ent.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted while we walked
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if len(l.out) == l.limit {
			l.more = true
			return errPageFull
		}
		l.out = append(l.out, fileInfo(key, fi))
	}
	return nil
}
