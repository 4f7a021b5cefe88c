package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/require"
)

// writeKeys stores keys as the directory bucket lays them out (the object
// "a/b" is the file root/a/b), faster than a Put each: these tests are
// about listing them.
func writeKeys(t *testing.T, root string, keys []string) {
	t.Helper()
	for _, k := range keys {
		path := filepath.Join(root, filepath.FromSlash(k))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(k), 0o644))
	}
}

// countReads counts, per key directory, the directories listings read
// from the filesystem (see SetTestHook).
func countReads(t *testing.T) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	reads := map[string]int{}
	bucket.SetTestHook(func(point, key string) {
		if point == "readdir" {
			mu.Lock()
			reads[key]++
			mu.Unlock()
		}
	})
	t.Cleanup(func() { bucket.SetTestHook(nil) })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range reads {
			out[k] = v
		}
		return out
	}
}

// after returns the keys of sorted that sort after a.
func after(sorted []string, a string) []string {
	i, found := slices.BinarySearch(sorted, a)
	if found {
		i++
	}
	return sorted[i:]
}

// TestDirListKeepsNames: paging through a directory of 3,000 keys that
// nothing changes reads it once per listing, not once per page. A key put
// or deleted before a listing begins is listed, or not, by it.
func TestDirListKeepsNames(t *testing.T) {
	d, root := newDir(t)
	var keys []string
	for i := range 3000 {
		keys = append(keys, fmt.Sprintf("f/%04d", i))
	}
	writeKeys(t, root, keys)
	reads := countReads(t)

	require.Equal(t, keys, keysOf(listAll(t, d, "f/", "", 1000)))
	require.Equal(t, 1, reads()["f/"], "directory reads for a listing of 3 pages")
	require.Equal(t, keys[1500:], keysOf(listAll(t, d, "f/", keys[1499], 300)))
	require.Equal(t, 2, reads()["f/"], "directory reads for listings of 3 and 5 pages")

	put(t, d, "f/1500a", "x")
	keys = append(keys, "f/1500a")
	slices.Sort(keys)
	require.Equal(t, after(keys, "f/1499"), keysOf(listAll(t, d, "f/", "f/1499", 300)), "after a put")
	del(t, d, "f/2000")
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "f/2000" })
	require.Equal(t, after(keys, "f/1999"), keysOf(listAll(t, d, "f/", "f/1999", 300)), "after a delete")
}

// TestDirListSeesWhatWasStoredBefore: a listing returns every key stored
// before it began even when the directory looks unchanged since names
// were kept (as when a key lands in the timestamp tick of the read that
// kept them): kept names serve only the later pages of the listing whose
// read kept them. The same holds for a key another bucket instance (in
// another process, a claimant) stored.
func TestDirListSeesWhatWasStoredBefore(t *testing.T) {
	d, root := newDir(t)
	var keys []string
	for i := range 3000 {
		keys = append(keys, fmt.Sprintf("f/%04d", i))
	}
	writeKeys(t, root, keys)
	reads := countReads(t)
	require.Equal(t, keys[:1000], keysOf(listPage(t, d, "f/", "", 1000).Objects))

	// Stored behind the kept names' back, with the stamp they were kept
	// at made current again: only the listing's own read can tell.
	writeKeys(t, root, []string{"f/0500a"})
	require.True(t, bucket.RestampKept(d, filepath.Join(root, "f")), "names kept by the first page")
	keys = append(keys, "f/0500a")
	slices.Sort(keys)
	n := reads()["f/"]
	require.Equal(t, keys, keysOf(listAll(t, d, "f/", "", 1000)), "a listing begun after the key was stored")
	require.Equal(t, n+1, reads()["f/"], "directory reads of the new listing")

	other, err := bucket.NewDir(root)
	require.NoError(t, err)
	put(t, other, "f/0700a", "x")
	keys = append(keys, "f/0700a")
	slices.Sort(keys)
	require.True(t, bucket.RestampKept(d, filepath.Join(root, "f")), "names kept by the last listing")
	require.Equal(t, keys, keysOf(listAll(t, d, "f/", "", 1000)), "a key another instance stored")
}

// TestDirListReadsOnlyItsPath: a page starting deep inside a tree reads
// the directories on the way to its start and those its keys are in (and
// the next key's, to know there is more), never the rest of the tree.
func TestDirListReadsOnlyItsPath(t *testing.T) {
	d, root := newDir(t)
	var keys []string
	for i := range 10 {
		for j := range 10 {
			for k := range 12 {
				keys = append(keys, fmt.Sprintf("t/%02d/%02d/%02d", i, j, k))
			}
		}
	}
	writeKeys(t, root, keys)
	reads := countReads(t)
	for _, start := range []string{"t/05/05/03", "t/05/05/", "t/05/05", "t/05/04/11", "t/05/09/11", "t/05/", ""} {
		before := reads()
		p := listPage(t, d, "t/", start, 10)
		want := after(keys, start)
		require.Equal(t, want[:10], keysOf(p.Objects), "page after %q", start)
		require.True(t, p.More)
		// The directories above start and above the page's keys and the
		// next one.
		allowed := map[string]bool{}
		for _, k := range append([]string{start}, want[:11]...) {
			for i := range len(k) {
				if k[i] == '/' {
					allowed[k[:i+1]] = true
				}
			}
		}
		for dir, n := range reads() {
			if n > before[dir] && !allowed[dir] {
				t.Errorf("page after %q read %s, not on its path", start, dir)
			}
		}
	}
}

// TestDirListCachedModel: random puts, deletes and listings on a
// directory of 1,500 keys and subdirectories with names that are prefixes
// of one another, with names kept between the pages of a listing; every
// listing equals the sorted model.
func TestDirListCachedModel(t *testing.T) {
	d, root := newDir(t)
	rng := rand.New(rand.NewPCG(3, 5))
	const alphabet = "!-.0a~"
	name := func() string {
		b := make([]byte, 1+rng.IntN(5))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if s := string(b); s != "." && s != ".." {
			return s
		}
		return "x"
	}
	model := map[string]bool{}
	conflicts := func(k string) bool {
		for o := range model {
			if k == o || strings.HasPrefix(k, o+"/") || strings.HasPrefix(o, k+"/") {
				return true
			}
		}
		return false
	}
	newKey := func() string {
		for {
			k := "r/" + name()
			if rng.IntN(4) == 0 {
				k += "/" + name()
			}
			if !conflicts(k) {
				return k
			}
		}
	}
	var initial []string
	for len(model) < 1500 {
		k := newKey()
		model[k] = true
		initial = append(initial, k)
	}
	writeKeys(t, root, initial)
	reads := countReads(t)
	pages := 0
	for step := range 200 {
		switch op := rng.IntN(20); {
		case op == 0:
			k := newKey()
			put(t, d, k, k)
			model[k] = true
		case op == 1:
			for k := range model {
				del(t, d, k)
				delete(model, k)
				break
			}
		default:
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range model {
					if !yield(k) {
						return
					}
				}
			})
			start := ""
			if rng.IntN(4) != 0 {
				start = keys[rng.IntN(len(keys))]
				start = start[:rng.IntN(len(start)+1)]
			}
			prefix := "r/"
			if rng.IntN(3) == 0 {
				prefix += name()[:1]
			}
			limit := []int{50, 200, 0}[rng.IntN(3)]
			var want []string
			for _, k := range after(keys, start) {
				if strings.HasPrefix(k, prefix) {
					want = append(want, k)
				}
			}
			all := listAll(t, d, prefix, start, limit)
			got := keysOf(all)
			require.Equal(t, len(want), len(got), "step %d: list %q after %q limit %d", step, prefix, start, limit)
			if len(want) > 0 {
				require.Equal(t, want, got, "step %d: list %q after %q limit %d", step, prefix, start, limit)
			}
			size := limit
			if size == 0 {
				size = bucket.DefaultPageSize
			}
			pages += len(all)/size + 1
		}
	}
	// The names were kept and used: fewer reads of r/ than pages of it.
	require.Less(t, reads()["r/"], pages, "reads of r/ for %d pages", pages)
}

// TestDirListStartInsideReserved: a listing starting inside the bucket's
// own directory lists no temporary file.
func TestDirListStartInsideReserved(t *testing.T) {
	d, root := newDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, ".framectl", "tmp", "put-123"), []byte("x"), 0o644))
	put(t, d, "a", "a")
	for _, start := range []string{".framectl/", ".framectl/tmp/", ".framectl/tmp/put-1", ".framectl/lock"} {
		require.Equal(t, []string{"a"}, keysOf(listAll(t, d, "", start, 0)), "after %q", start)
	}
}
