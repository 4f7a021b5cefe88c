package bucket

import (
	"sync"
	"sync/atomic"
)

// listCache keeps the sorted entries of large directories between the
// pages of one listing. A listing that pages through a directory of n keys
// would otherwise read and sort all n names for every page of 1,000: the
// whole directory is the only way to learn which names follow startAfter,
// since filesystems return names in hash or creation order. With the
// entries kept, the next page finds its place by binary search.
//
// Validity, without a clock. A listing must return every key stored before
// it began (read-after-write: a claimant lists the old owner's log after
// its own write, and package fence's proof of ownership rests on it). Kept
// names are used only by a page of a listing that began before the read
// that produced them: each read and each listing takes a number from one
// counter (gen), and names read at gen g serve a listing that began at
// since only if g > since, so the read saw every name stored before that
// listing began. A page continues a listing when it starts after the last
// key of the listing's previous page (tokens); any other page begins a
// listing of its own, and reads each directory it walks once. Keys stored
// while a listing pages may be missed by its later pages, as on S3; none
// stored before it began is. No timestamp is trusted for that: the
// directory's stamp (device, inode, link count, size, modification and
// change times) is still compared, but only to drop names that are
// visibly stale sooner.
//
// Only directories of at least listCacheMinEntries names are kept (reading
// a smaller one costs about as much as the lstat of the keys a page
// returns), at most listCacheBytes in all, least recently used dropped
// first.
type listCache struct {
	gen atomic.Uint64 // numbers reads and listings (see Validity)

	mu     sync.Mutex
	dirs   map[string]*sortedDir
	bytes  int
	clock  uint64               // counts uses, for least recently used
	tokens map[listToken]uint64 // a listing's next page → when it began
}

// listToken names the page that continues a listing: the one after key
// under prefix.
type listToken struct{ prefix, after string }

// sortedDir is a directory's entries in key order and the stamp they
// were read at. It is never modified once made: listings share it.
type sortedDir struct {
	stamp   dirStamp
	gen     uint64 // when the read began (listCache.gen)
	entries []listEntry
	bytes   int
	used    uint64
}

// dirStamp identifies a state of a directory, coarsely: a change in the
// timestamp tick of the last may leave it as it was, so it only drops
// names that are visibly stale (see listCache). The zero value (valid
// false) matches nothing cached.
type dirStamp struct {
	valid        bool
	dev, ino     uint64
	nlink        uint64
	size         int64
	mtime, ctime int64 // nanoseconds since 1970
}

const (
	// listCacheMinEntries: a directory of 1,000 names reads in about
	// 0.3 ms, as long as the lstat of 1,000 keys (BenchmarkDirList).
	listCacheMinEntries = 1024
	// listCacheBytes bounds the names kept: a directory of 100,000 keys of
	// 20 bytes takes 4.4 MB.
	listCacheBytes = 32 << 20
	// entryOverhead is what a kept name costs besides its bytes.
	entryOverhead = 24
	// maxListTokens bounds the listings in progress remembered; past it
	// one is forgotten, and its next page reads afresh.
	maxListTokens = 4096
)

func newListCache() *listCache {
	return &listCache{dirs: map[string]*sortedDir{}, tokens: map[listToken]uint64{}}
}

// next numbers a read or a listing that begins now.
func (c *listCache) next() uint64 { return c.gen.Add(1) }

// begin returns when the listing that a page of prefix after startAfter
// belongs to began: when the page that ended at startAfter began its
// listing, or now.
func (c *listCache) begin(prefix, startAfter string) uint64 {
	c.mu.Lock()
	since, ok := c.tokens[listToken{prefix, startAfter}]
	if ok {
		delete(c.tokens, listToken{prefix, startAfter})
	}
	c.mu.Unlock()
	if ok {
		return since
	}
	return c.next()
}

// continued records that the listing begun at since goes on with the page
// of prefix after last.
func (c *listCache) continued(prefix, last string, since uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tokens) >= maxListTokens {
		for t := range c.tokens {
			delete(c.tokens, t) // an abandoned listing, most likely
			break
		}
	}
	c.tokens[listToken{prefix, last}] = since
}

// get returns the entries kept for path if they were read at stamp, by a
// read that began after since.
func (c *listCache) get(path string, stamp dirStamp, since uint64) ([]listEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sd, ok := c.dirs[path]
	if !ok || sd.gen <= since {
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

// put keeps entries for path, read at stamp by a read begun at gen, if
// they are worth it.
func (c *listCache) put(path string, stamp dirStamp, gen uint64, entries []listEntry) {
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
	c.dirs[path] = &sortedDir{stamp: stamp, gen: gen, entries: entries, bytes: size, used: c.clock}
	c.bytes += size
}

func (c *listCache) drop(path string, sd *sortedDir) {
	delete(c.dirs, path)
	c.bytes -= sd.bytes
}
