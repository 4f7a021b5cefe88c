package bucket

import (
	"sync"
	"time"
)

// listCache keeps the sorted entries of large directories between
// listings. A listing that pages through a directory of n keys would
// otherwise read and sort all n names for every page of 1,000: the whole
// directory is the only way to learn which names follow startAfter, since
// filesystems return names in hash or creation order. With the entries
// kept, the next page finds its place by binary search.
//
// Validity. An entry is used only while the directory's stamp (device,
// inode, link count, size, modification and change times, read with one
// stat) is what it was when the names were read. The kernel sets a
// directory's modification and change times whenever a name is added to
// it, removed or replaced (POSIX: creat, mkdir, rename, unlink, rmdir
// "mark for update" the parent's timestamps), and a change time cannot be
// set by anyone. But timestamps tick coarsely: a name added in the same
// tick as the last change leaves the stamp as it was. So names are kept
// only if the directory's last change was more than settle before the
// read began: any change after the read then carries a later time (as git
// treats an index entry whose file changed in the second the index was
// written: "racy git"). A directory changed within settle of a listing is
// read again by the next one. The filesystem must record sub-second
// change times (checked: a change time that is a whole second, as on
// filesystems that store seconds, is never trusted); what is not covered
// is the wall clock stepping back by more than settle between the read
// and a later change.
//
// Only directories of at least listCacheMinEntries names are kept (reading
// a smaller one costs about as much as the lstat of the keys a page
// returns), at most listCacheBytes in all, least recently used dropped
// first.
type listCache struct {
	mu    sync.Mutex
	dirs  map[string]*sortedDir
	bytes int
	clock uint64 // counts uses, for least recently used
}

// sortedDir is a directory's entries in key order and the stamp they
// were read at. It is never modified once made: listings share it.
type sortedDir struct {
	stamp   dirStamp
	entries []listEntry
	bytes   int
	used    uint64
}

// dirStamp identifies a state of a directory (see listCache). The zero
// value (valid false) matches nothing cached.
type dirStamp struct {
	valid        bool
	dev, ino     uint64
	nlink        uint64
	size         int64
	mtime, ctime int64 // nanoseconds since 1970
}

const (
	// listSettle: see Validity on listCache. One second is far past any
	// kernel's timestamp tick (1 to 10 ms) and the sub-second timestamp
	// granularity of any filesystem (exFAT's 10 ms is the coarsest).
	listSettle = time.Second
	// listCacheMinEntries: a directory of 1,000 names reads in about
	// 0.3 ms, as long as the lstat of 1,000 keys (BenchmarkDirList).
	listCacheMinEntries = 1024
	// listCacheBytes bounds the names kept: a directory of 100,000 keys of
	// 20 bytes takes 4.4 MB.
	listCacheBytes = 32 << 20
	// entryOverhead is what a kept name costs besides its bytes.
	entryOverhead = 24
)

// settled reports whether a directory read at this stamp, beginning at
// start, may be kept.
func (s dirStamp) settled(start time.Time, settle time.Duration) bool {
	limit := start.Add(-settle).UnixNano()
	return s.valid && s.ctime%int64(time.Second) != 0 && s.ctime < limit && s.mtime < limit
}

func newListCache() *listCache { return &listCache{dirs: map[string]*sortedDir{}} }

// get returns the entries kept for path if they were read at stamp.
func (c *listCache) get(path string, stamp dirStamp) ([]listEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sd, ok := c.dirs[path]
	if !ok {
		return nil, false
	}
	if !stamp.valid || sd.stamp != stamp {
		c.drop(path, sd)
		return nil, false
	}
	c.clock++
	sd.used = c.clock
	return sd.entries, true
}

// has reports whether entries are kept for path (possibly stale).
func (c *listCache) has(path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.dirs[path]
	return ok
}

// forget drops what is kept for path.
func (c *listCache) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sd, ok := c.dirs[path]; ok {
		c.drop(path, sd)
	}
}

// put keeps entries read at stamp for path, if they are worth it.
func (c *listCache) put(path string, stamp dirStamp, entries []listEntry) {
	if len(entries) < listCacheMinEntries {
		return
	}
	size := 0
	for _, e := range entries {
		size += len(e.name) + entryOverhead
	}
	if size > listCacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.dirs[path]; ok {
		c.drop(path, old)
	}
	for c.bytes+size > listCacheBytes {
		var lruPath string
		var lru *sortedDir
		for p, sd := range c.dirs {
			if lru == nil || sd.used < lru.used {
				lruPath, lru = p, sd
			}
		}
		c.drop(lruPath, lru)
	}
	c.clock++
	c.dirs[path] = &sortedDir{stamp: stamp, entries: entries, bytes: size, used: c.clock}
	c.bytes += size
}

func (c *listCache) drop(path string, sd *sortedDir) {
	delete(c.dirs, path)
	c.bytes -= sd.bytes
}
