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
// Cost. The walk starts at startAfter: in each directory on its path it
// finds, by binary search in the sorted entries, the first entry that can
// hold a later key, and it stops at the first key past the page. A
// subtree whose keys all sort at or before startAfter is never read. A
// page therefore costs the directories it walks through plus an lstat per
// key returned. On Linux a large directory's sorted entries are also kept
// for the later pages of the listing that read them (listCache): a page
// of 1,000 from a directory of 100,000 keys then costs about what a page
// from a directory of 1,000 does, instead of a read and sort of all
// 100,000 names (BenchmarkDirList). A listing sees every key stored
// before its first page began, whatever the clocks say.
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
	l := dirLister{ctx: ctx, d: d, limit: limit, since: d.lists.begin(prefix, startAfter)}
	var err error
	fsDir := filepath.Join(d.root, filepath.FromSlash(keyDir))
	switch rest, inside := strings.CutPrefix(startAfter, keyDir); {
	case inside:
		err = l.walk(fsDir, keyDir, partial, rest, true)
	case startAfter < keyDir:
		err = l.walk(fsDir, keyDir, partial, "", false)
	default:
		// startAfter differs from keyDir at a byte where it is greater:
		// every key under keyDir sorts before it.
	}
	if err != nil && err != errPageFull {
		return Page{}, &Error{Op: "list", Key: prefix, Err: err}
	}
	if l.more && len(l.out) > 0 {
		d.lists.continued(prefix, l.out[len(l.out)-1].Key, l.since)
	}
	return Page{Objects: l.out, More: l.more}, nil
}

// errPageFull stops the walk once a key past the page is seen.
var errPageFull = errors.New("page full")

type dirLister struct {
	ctx   context.Context
	d     *Dir
	limit int
	since uint64 // when the listing began (listCache)
	out   []Info
	more  bool
}

// listEntry is a regular file or a directory in a directory being listed.
type listEntry struct {
	name string
	dir  bool
}

// compareEntries orders entries by sort name: the name, with "/" appended
// for a directory (see Order on List), without building that string.
func compareEntries(a, b listEntry) int {
	n := min(len(a.name), len(b.name))
	if c := strings.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c
	}
	return compareNext(a, n) - compareNext(b, n)
}

// compareEntryTo compares e's sort name with s.
func compareEntryTo(e listEntry, s string) int {
	n := min(len(e.name), len(s))
	if c := strings.Compare(e.name[:n], s[:n]); c != 0 {
		return c
	}
	next := -1
	if n < len(s) {
		next = int(s[n])
	}
	return compareNext(e, n) - next
}

// compareNext is the byte of e's sort name at i: -1 past its end.
func compareNext(e listEntry, i int) int {
	switch {
	case i < len(e.name):
		return int(e.name[i])
	case i == len(e.name) && e.dir:
		return '/'
	}
	return -1
}

// entriesBuilder collects entries with few allocations: the names added
// between two flushes share one string, and the entries of each flush
// one slice, joined at the end (appending to a single slice would
// allocate it several times over as it grows).
type entriesBuilder struct {
	chunks  [][]listEntry
	n       int
	pending []byte // names not yet flushed
	ends    []int  // where each pending name ends in pending
	dirs    []bool
}

func (b *entriesBuilder) add(name []byte, dir bool) {
	b.pending = append(b.pending, name...)
	b.ends = append(b.ends, len(b.pending))
	b.dirs = append(b.dirs, dir)
}

// flush turns the pending names into entries.
func (b *entriesBuilder) flush() {
	if len(b.ends) == 0 {
		return
	}
	s := string(b.pending)
	chunk := make([]listEntry, len(b.ends))
	off := 0
	for i, end := range b.ends {
		chunk[i] = listEntry{name: s[off:end], dir: b.dirs[i]}
		off = end
	}
	b.chunks = append(b.chunks, chunk)
	b.n += len(chunk)
	b.pending, b.ends, b.dirs = b.pending[:0], b.ends[:0], b.dirs[:0]
}

func (b *entriesBuilder) done() []listEntry {
	b.flush()
	if len(b.chunks) == 1 {
		return b.chunks[0]
	}
	return slices.Concat(b.chunks...)
}

// sortedEntries returns the entries of directory path in key order, for
// a listing begun at since: from the cache if a read begun after since
// kept them and the directory looks unchanged since (fresh reports a
// read).
func (d *Dir) sortedEntries(path string, since uint64) (ents []listEntry, fresh bool, err error) {
	if d.lists.has(path) {
		st, err := stampDir(path)
		if err != nil {
			d.lists.forget(path)
			return nil, false, err
		}
		if ents, ok := d.lists.get(path, st, since); ok {
			return ents, false, nil
		}
	}
	gen := d.lists.next()
	ents, before, after, err := readDir(path)
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(ents, compareEntries)
	if before == after {
		d.lists.put(path, before, gen, ents)
	}
	return ents, true, nil
}

// walk lists directory fsDir, which holds the keys starting with keyDir
// ("" or ending in "/"), restricted to names starting with partial. If
// after is set, only keys sorting after keyDir+rest are wanted.
func (l *dirLister) walk(fsDir, keyDir, partial, rest string, after bool) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	ents, fresh, err := l.d.sortedEntries(fsDir, l.since)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // no keys here, or removed while we walked
		}
		return err
	}
	if fresh && testHook != nil {
		testHook("readdir", keyDir)
	}
	// The entries whose names start with partial are a run: their sort
	// names all start with partial, which holds no '/'.
	lo, _ := slices.BinarySearchFunc(ents, partial, compareEntryTo)
	hi := lo + sortPrefixRun(ents[lo:], partial)
	ents = ents[lo:hi]
	if after {
		// rest is startAfter within this directory. If it lies inside a
		// subdirectory ("x/..."), that one is walked from rest onwards and
		// everything after it whole; otherwise everything after rest.
		comp, _, inSub := strings.Cut(rest, "/")
		if inSub {
			i, found := slices.BinarySearchFunc(ents, comp+"/", compareEntryTo)
			if found && !reserved(keyDir, ents[i]) {
				e := ents[i]
				if err := l.walk(filepath.Join(fsDir, e.name), keyDir+e.name+"/", "", rest[len(e.name)+1:], true); err != nil {
					return err
				}
			}
			if found {
				i++
			}
			ents = ents[i:]
		} else {
			i, found := slices.BinarySearchFunc(ents, rest, compareEntryTo)
			if found {
				i++ // the key startAfter itself
			}
			ents = ents[i:]
		}
	}
	for _, e := range ents {
		if reserved(keyDir, e) {
			continue
		}
		if e.dir {
			if err := l.walk(filepath.Join(fsDir, e.name), keyDir+e.name+"/", "", "", false); err != nil {
				return err
			}
			continue
		}
		fi, err := os.Lstat(filepath.Join(fsDir, e.name))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // deleted while we walked
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			continue // replaced by a directory since the names were read
		}
		if len(l.out) == l.limit {
			l.more = true
			return errPageFull
		}
		l.out = append(l.out, fileInfo(keyDir+e.name, fi))
	}
	return nil
}

// reserved reports the directory bucket's own directory, which holds no
// keys.
func reserved(keyDir string, e listEntry) bool { return keyDir == "" && e.name == ReservedName }

// sortPrefixRun returns how many entries at the start of ents have sort
// names starting with p.
func sortPrefixRun(ents []listEntry, p string) int {
	if p == "" {
		return len(ents)
	}
	n, _ := slices.BinarySearchFunc(ents, p, func(e listEntry, p string) int {
		if strings.HasPrefix(e.name, p) {
			return -1
		}
		return compareEntryTo(e, p)
	})
	return n
}
