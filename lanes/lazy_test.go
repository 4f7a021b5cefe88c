package lanes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/frames"
)

const testChunkPages = 4

// manifestOf describes s as a manifest of chunks of testChunkPages pages
// (hashes left zero: lanes never reads them), with the fingerprints its
// trackers give, and returns the lanes' bytes to serve the chunks from.
func manifestOf(t *testing.T, s *Set) (*frames.Manifest, map[uint32][]byte) {
	t.Helper()
	m := &frames.Manifest{Epoch: 7, Seq: s.Seq(), CommitTime: s.CommitTime()}
	data := map[uint32][]byte{}
	for _, l := range s.Lanes() {
		tr, ok := s.Tracker(l.Number)
		require.True(t, ok)
		ps := l.PageSize
		if ps == 0 {
			ps = DefaultPageSize
		}
		ml := frames.ManifestLane{Lane: l.Number, Kind: l.Kind, PageSize: ps, Pages: l.Pages, Checksum: l.Checksum, ChunkPages: testChunkPages}
		for first := uint32(1); first <= l.Pages; first += testChunkPages {
			n := min(testChunkPages, l.Pages-first+1)
			ml.Chunks = append(ml.Chunks, frames.ChunkRef{FirstPage: first, Pages: n, Fingerprint: tr.Fingerprint(first, n)})
		}
		m.Lanes = append(m.Lanes, ml)
		b, err := os.ReadFile(l.Path)
		require.NoError(t, err)
		data[l.Number] = b
	}
	return m, data
}

// zeroFingerprint reports whether m has a chunk whose fingerprint is 0
// (a 2^-64 chance: page hashes include the page number).
func zeroFingerprint(m *frames.Manifest) bool {
	for _, l := range m.Lanes {
		for _, c := range l.Chunks {
			if c.Fingerprint == 0 {
				return true
			}
		}
	}
	return false
}

// TestLazyModel replays random frames of every kind (writes, growth,
// truncation, lanes created, emptied and deleted, continued parts) over a
// Set loaded whole and over a lazy Set made from a manifest of the same
// state, loading in the lazy one only the chunks Needs names. The two end
// with the same lanes, checksums and chunk fingerprints, the chunks loaded
// hold the same bytes, VerifyFiles passes, and some chunks were never
// loaded.
func TestLazyModel(t *testing.T) {
	untouched, loaded := 0, 0
	for seed := uint64(1); seed <= 64; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := newGen(seed)
			g.maxPages = 40
			full := newTestSet(t)
			for range 200 {
				f := g.next()
				mustApply(t, full, splitParts(f, 1+g.rng.IntN(6))...)
			}
			m, base := manifestOf(t, full)
			require.False(t, zeroFingerprint(m))
			lazy, err := NewLazySet(t.TempDir(), m, "snapshot/test")
			require.NoError(t, err)
			t.Cleanup(func() { lazy.Close() })
			checkLazy(t, full, lazy)
			g.overwrite = 16 // few pages per frame: most chunks stay untouched
			for range 2 + seed%8 {
				f := g.next()
				for _, part := range splitParts(f, 1+g.rng.IntN(6)) {
					require.NoError(t, full.Apply(&part))
					for _, id := range lazy.Needs(&part) {
						ml := laneOfManifest(m, id.Lane)
						c := ml.Chunks[id.Index]
						ps := int(ml.PageSize)
						require.NoError(t, lazy.Fill(id, base[id.Lane][int(c.FirstPage-1)*ps:int(c.FirstPage-1+c.Pages)*ps]))
						loaded++
					}
					require.NoError(t, lazy.Apply(&part), "apply %s", part.String())
				}
			}
			checkLazy(t, full, lazy)
			untouched += lazy.Pending()
		})
	}
	require.Positive(t, untouched, "some chunk was never needed")
	require.Positive(t, loaded, "some chunk was needed")
}

func laneOfManifest(m *frames.Manifest, lane uint32) *frames.ManifestLane {
	for i := range m.Lanes {
		if m.Lanes[i].Lane == lane {
			return &m.Lanes[i]
		}
	}
	return nil
}

// checkLazy compares a lazy Set with a Set loaded whole at the same state.
func checkLazy(t *testing.T, full, lazy *Set) {
	t.Helper()
	require.NoError(t, lazy.VerifyFiles(context.Background()))
	require.Equal(t, full.Seq(), lazy.Seq())
	fl, ll := full.Lanes(), lazy.Lanes()
	require.Len(t, ll, len(fl))
	fs, err := full.Sources()
	require.NoError(t, err)
	ls, err := lazy.Sources()
	require.NoError(t, err)
	for i := range fl {
		require.Equal(t, fl[i].Number, ll[i].Number)
		require.Equal(t, fl[i].Pages, ll[i].Pages, "lane %d", fl[i].Number)
		require.Equal(t, fl[i].Checksum, ll[i].Checksum, "lane %d", fl[i].Number)
		if fl[i].Pages > 0 {
			require.Equal(t, fl[i].PageSize, ll[i].PageSize)
		}
		fd, err := os.ReadFile(fl[i].Path)
		require.NoError(t, err)
		ld, err := os.ReadFile(ll[i].Path)
		require.NoError(t, err)
		require.Len(t, ld, len(fd))
		for first := uint32(1); first <= fl[i].Pages; first += testChunkPages {
			n := min(testChunkPages, fl[i].Pages-first+1)
			require.Equal(t, fs[i].Tracker.Fingerprint(first, n), ls[i].Tracker.Fingerprint(first, n), "lane %d chunk at %d", fl[i].Number, first)
			l := lazy.lanes[fl[i].Number]
			if pending, _ := l.lazySpan(first); pending {
				continue
			}
			ps := int(fl[i].PageSize)
			from, to := int(first-1)*ps, int(first-1+n)*ps
			if !bytes.Equal(fd[from:to], ld[from:to]) {
				t.Fatalf("lane %d: pages %d..%d differ", fl[i].Number, first, first+n-1)
			}
		}
	}
}

// A frame that touches a chunk not loaded is refused before anything is
// written; a chunk whose pages do not give its fingerprint is refused by
// Fill; a lazy Set cannot be written out whole.
func TestLazyRefuses(t *testing.T) {
	full := newTestSet(t)
	g := newGen(3)
	g.lanes, g.maxPages = 1, 30
	mustApply(t, full, g.next())
	for full.Lanes()[0].Pages < 20 {
		f := g.pagesFrame(0)
		mustApply(t, full, f)
	}
	m, base := manifestOf(t, full)
	lazy, err := NewLazySet(t.TempDir(), m, "snapshot/test")
	require.NoError(t, err)
	defer lazy.Close()

	// Overwrite page 1 (chunk 0).
	l := g.m.lanes[0]
	f := g.header(0, frames.KindSQLitePages)
	f.SQLite = frames.SQLitePages{PageSize: l.pageSize, DatabasePages: l.pages(), Before: l.checksum(),
		Pages: []frames.Page{{Number: 1, Data: g.page(l.pageSize)}}}
	g.m.applyPages(&f)
	f.SQLite.After = l.checksum()
	require.Equal(t, []ChunkID{{Lane: 0, Index: 0}}, lazy.Needs(&f))
	wantErr(t, lazy.Apply(&f), ErrNotLoaded)
	require.NoError(t, lazy.Err(), "refused before writing: the Set is usable")
	require.Equal(t, m.Seq, lazy.Seq())

	ps := int(l.pageSize)
	wrong := bytes.Clone(base[0][:testChunkPages*ps])
	wrong[7] ^= 1
	wantErr(t, lazy.Fill(ChunkID{Lane: 0, Index: 0}, wrong), ErrChecksum)
	require.NoError(t, lazy.Fill(ChunkID{Lane: 0, Index: 0}, base[0][:testChunkPages*ps]))
	wantErr(t, lazy.Fill(ChunkID{Lane: 0, Index: 0}, base[0][:testChunkPages*ps]), ErrNotLoaded)
	require.NoError(t, lazy.Apply(&f))

	_, err = lazy.WriteSnapshot(context.Background(), &bytes.Buffer{}, 7, frames.WriteOptions{})
	wantErr(t, err, ErrNotLoaded)
	_, ok := lazy.Tracker(0)
	require.False(t, ok, "a lane with chunks not loaded has no tracker to give")

	// Chunks that do not cover the lane are corrupt.
	short := *m
	short.Lanes = []frames.ManifestLane{m.Lanes[0]}
	short.Lanes[0].Chunks = short.Lanes[0].Chunks[1:]
	_, err = NewLazySet(t.TempDir(), &short, "snapshot/test")
	wantErr(t, err, ErrCorrupt)
	short.Lanes[0].Chunks, short.Lanes[0].ChunkPages = m.Lanes[0].Chunks, 0
	_, err = NewLazySet(t.TempDir(), &short, "snapshot/test")
	wantErr(t, err, ErrCorrupt)

	// A manifest without fingerprints, or whose fingerprints do not XOR
	// to the checksum, cannot back a lazy Set.
	m.Lanes[0].Chunks[1].Fingerprint ^= 1
	_, err = NewLazySet(t.TempDir(), m, "snapshot/test")
	wantErr(t, err, ErrNotLazy)
	m.Lanes[0].Chunks[1].Fingerprint = 0
	_, err = NewLazySet(t.TempDir(), m, "snapshot/test")
	wantErr(t, err, ErrNotLazy)
}
