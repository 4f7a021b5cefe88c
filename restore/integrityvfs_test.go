package restore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// readCounter counts the reads that reach the file.
type readCounter struct {
	r     io.ReaderAt
	reads atomic.Int64
	bytes atomic.Int64
}

func (c *readCounter) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	c.bytes.Add(int64(len(p)))
	return c.r.ReadAt(p, off)
}

// TestIntegrityFileReads drives the read-ahead with the patterns SQLite's
// integrity_check makes (a walk back from the last page, a scan forward,
// scattered pages) and with reads that straddle a window's edge, run past
// the end of the file or exceed the window: every read returns what the
// file holds, with io.EOF exactly when it runs past the end, as
// go-sqlite3's vfsRead expects of a short read. The runs are served by far
// fewer reads of the file than pages (that is the read-ahead), scattered
// pages and scattered pairs of neighbours by one read of their own bytes
// each (a window for them would cost more than it saves).
func TestIntegrityFileReads(t *testing.T) {
	const ps = 4096
	size := int64(8*integrityWindow + 3*ps + 123) // not a whole number of pages
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	pages := int((size + ps - 1) / ps)
	src := &readCounter{r: bytes.NewReader(data)}
	f := newIntegrityFile(src, size)
	defer f.Close()

	check := func(what string, off int64, n int) {
		t.Helper()
		p := make([]byte, n)
		got, err := f.ReadAt(p, off)
		want := 0
		if off < size {
			want = int(min(int64(n), size-off))
		}
		require.Equal(t, want, got, "%s: read %d at %d", what, n, off)
		if want < n {
			require.ErrorIs(t, err, io.EOF, "%s: short read %d at %d", what, n, off)
		} else {
			require.NoError(t, err, "%s: read %d at %d", what, n, off)
		}
		if got > 0 && !bytes.Equal(p[:got], data[off:off+int64(got)]) {
			t.Fatalf("%s: read %d at %d: wrong bytes", what, n, off)
		}
	}

	src.reads.Store(0)
	for pg := pages - 1; pg >= 0; pg-- {
		check("backward", int64(pg)*ps, ps)
	}
	backward := src.reads.Load()
	src.reads.Store(0)
	for pg := range pages {
		check("forward", int64(pg)*ps, ps)
	}
	forward := src.reads.Load()
	t.Logf("%d pages: %d reads backward, %d forward", pages, backward, forward)
	require.Less(t, backward, int64(pages/10), "backward walk not read ahead")
	require.Less(t, forward, int64(pages/10), "forward scan not read ahead")

	// Scattered pages, far from each other: one read each, none ahead.
	src.reads.Store(0)
	for i := range 200 {
		pg := (i * 7919) % pages // 7919 pages apart, wrapping: never near the last
		check("scattered", int64(pg)*ps, ps)
	}
	require.LessOrEqual(t, src.reads.Load(), int64(200), "scattered pages read ahead")

	// Scattered pairs of neighbours: a pair starts no run, so the file is
	// read for the pages only.
	src.reads.Store(0)
	src.bytes.Store(0)
	for i := range 200 {
		pg := 1 + (i*7919)%(pages-2)
		check("pair", int64(pg)*ps, ps)
		check("pair", int64(pg+1+2*(i%2)*-1)*ps, ps) // after it, or before it
	}
	require.Equal(t, int64(400*ps), src.bytes.Load(), "pairs read ahead")

	// Runs that start anywhere, in either direction, with reads of any
	// size, across windows' edges and the end of the file.
	for i := range 300 {
		off := rng.Int64N(size + ps)
		n := 1 + rng.IntN(2*ps)
		step := int64(n)
		if i%2 == 1 {
			step = -step
		}
		for j := 0; j < 1+rng.IntN(600) && off >= 0 && off < size+ps; j++ {
			check(fmt.Sprintf("run %d", i), off, n)
			off += step
		}
	}
	check("larger than half a window", size/3, integrityWindow/2+1)
	check("larger than the window", 0, integrityWindow+ps)
	check("past the end", size, ps)
	check("the last bytes", size-10, ps)
}

// TestIntegrityFileRefusesWrites: the check's file is never written,
// truncated or synced.
func TestIntegrityFileRefusesWrites(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 8192)
	f := newIntegrityFile(bytes.NewReader(data), int64(len(data)))
	defer f.Close()
	_, err := f.WriteAt([]byte{1}, 0)
	require.True(t, errors.Is(err, sqlite3.READONLY), "write: %v", err)
	require.True(t, errors.Is(f.Truncate(0), sqlite3.READONLY), "truncate")
	require.Equal(t, bytes.Repeat([]byte{7}, 8192), data)
}
