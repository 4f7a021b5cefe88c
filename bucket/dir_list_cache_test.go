package bucket

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListCacheServesOnlyLaterReads: names kept by a read serve the
// listings that began before it, never one that began after it (which
// must see every key stored before it began); a page that continues a
// listing belongs to it, any other page begins one; remembered listings
// are bounded.
func TestListCacheServesOnlyLaterReads(t *testing.T) {
	c := newListCache()
	st := dirStamp{valid: true, ino: 1}
	ents := make([]listEntry, listCacheMinEntries)
	for i := range ents {
		ents[i] = listEntry{name: fmt.Sprintf("%05d", i)}
	}
	first := c.begin("p/", "")
	read := c.next()
	c.put("d", st, read, ents)
	_, ok := c.get("d", st, first)
	require.True(t, ok, "names read after the listing began")
	c.continued("p/", "p/00999", first)
	require.Equal(t, first, c.begin("p/", "p/00999"), "the next page of the listing")
	later := c.begin("p/", "p/00999") // the token was used: a listing of its own
	require.Greater(t, later, read)
	_, ok = c.get("d", st, later)
	require.False(t, ok, "names read before the listing began served it")
	require.True(t, c.has("d"), "names dropped for an older listing")
	_, ok = c.get("d", st, first)
	require.True(t, ok, "names still serve the listing they were read for")

	for i := range maxListTokens + 10 {
		c.continued("p/", fmt.Sprint(i), first)
	}
	require.LessOrEqual(t, len(c.tokens), maxListTokens)
}

// TestListCacheBudget: small directories are not kept, stale stamps drop
// what was kept, and past the byte budget the least recently used go
// first.
func TestListCacheBudget(t *testing.T) {
	entries := func(n int) []listEntry {
		out := make([]listEntry, n)
		for i := range out {
			out[i] = listEntry{name: fmt.Sprintf("%0100d", i)}
		}
		return out
	}
	st := func(ino uint64) dirStamp { return dirStamp{valid: true, ino: ino} }
	c := newListCache()
	c.put("small", st(1), 1, entries(listCacheMinEntries-1))
	require.False(t, c.has("small"), "a small directory kept")

	// Each big directory takes just under a third of the budget.
	n := listCacheBytes / 3 / (100 + entryOverhead)
	c.put("a", st(1), 1, entries(n))
	c.put("b", st(2), 1, entries(n))
	c.put("c", st(3), 1, entries(n))
	_, ok := c.get("a", st(1), 0) // a is now more recently used than b
	require.True(t, ok)
	c.put("d", st(4), 1, entries(n))
	require.False(t, c.has("b"), "least recently used kept past the budget")
	require.True(t, c.has("a") && c.has("c") && c.has("d"))
	require.LessOrEqual(t, c.bytes, listCacheBytes)

	_, ok = c.get("c", st(99), 0)
	require.False(t, ok, "entries returned for a changed directory")
	require.False(t, c.has("c"), "a changed directory's entries kept")
	c.forget("d")
	require.False(t, c.has("d"))
	c.put("huge", st(5), 1, entries(listCacheBytes/(100+entryOverhead)+1))
	require.False(t, c.has("huge"), "a directory over the whole budget kept")
}
