package bucket

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDirStampSettled: names are kept only when the directory's last
// change, by both its times, is more than settle before the read began,
// and the filesystem shows that it records sub-second change times.
func TestDirStampSettled(t *testing.T) {
	start := time.Unix(1_000_000, 500_000_000)
	old := start.Add(-2 * time.Second).UnixNano()
	recent := start.Add(-time.Second / 2).UnixNano()
	whole := start.Add(-2 * time.Second).Truncate(time.Second).UnixNano()
	for _, c := range []struct {
		name    string
		stamp   dirStamp
		settled bool
	}{
		{"old", dirStamp{valid: true, mtime: old, ctime: old}, true},
		{"changed recently", dirStamp{valid: true, mtime: old, ctime: recent}, false},
		{"modified recently", dirStamp{valid: true, mtime: recent, ctime: old}, false},
		{"whole-second change time", dirStamp{valid: true, mtime: old, ctime: whole}, false},
		{"no stamp", dirStamp{mtime: old, ctime: old}, false},
	} {
		assert.Equal(t, c.settled, c.stamp.settled(start, time.Second), c.name)
	}
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
	c.put("small", st(1), entries(listCacheMinEntries-1))
	require.False(t, c.has("small"), "a small directory kept")

	// Each big directory takes just under a third of the budget.
	n := listCacheBytes / 3 / (100 + entryOverhead)
	c.put("a", st(1), entries(n))
	c.put("b", st(2), entries(n))
	c.put("c", st(3), entries(n))
	_, ok := c.get("a", st(1)) // a is now more recently used than b
	require.True(t, ok)
	c.put("d", st(4), entries(n))
	require.False(t, c.has("b"), "least recently used kept past the budget")
	require.True(t, c.has("a") && c.has("c") && c.has("d"))
	require.LessOrEqual(t, c.bytes, listCacheBytes)

	_, ok = c.get("c", st(99))
	require.False(t, ok, "entries returned for a changed directory")
	require.False(t, c.has("c"), "a changed directory's entries kept")
	c.forget("d")
	require.False(t, c.has("d"))
	c.put("huge", st(5), entries(listCacheBytes/(100+entryOverhead)+1))
	require.False(t, c.has("huge"), "a directory over the whole budget kept")
}
