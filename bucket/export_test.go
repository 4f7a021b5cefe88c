package bucket

// SetTestHook makes every directory bucket in this process call f at
// named points, with the key (or key prefix) concerned:
//
//	"locked"    a commit has just taken the key's lock
//	"renaming"  a commit's parents exist, the rename into place is next
//	"readdir"   a listing has read the directory holding the keys that
//	            start with key ("" or ending in "/") from the filesystem,
//	            rather than finding its names kept from an earlier read
//
// nil removes the hook. Set it only while no commit or listing runs.
func SetTestHook(f func(point, key string)) { testHook = f }

// ListCacheMinEntries is the fewest names a directory must hold for a
// listing to keep them.
const ListCacheMinEntries = listCacheMinEntries

// RestampKept gives the names d keeps for directory path the directory's
// current stamp, as if what changed it since they were read had left its
// timestamps as they were (a change in the same tick). It reports whether
// names were kept.
func RestampKept(d *Dir, path string) bool {
	st, err := stampDir(path)
	if err != nil {
		panic(err)
	}
	d.lists.mu.Lock()
	defer d.lists.mu.Unlock()
	sd, ok := d.lists.dirs[path]
	if ok {
		sd.stamp = st
	}
	return ok
}
