package bucket

import "time"

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

// SetListSettle sets how long ago a directory must have last changed for
// d to keep its names between listings (listSettle by default).
func SetListSettle(d *Dir, settle time.Duration) { d.listSettle = settle }

// ListSettle is the default of SetListSettle.
const ListSettle = listSettle

// ListCacheMinEntries is the fewest names a directory must hold for a
// listing to keep them.
const ListCacheMinEntries = listCacheMinEntries
