package lanes

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// headerOf is the snapshot header of a Set's state, as a manifest would
// declare it.
func headerOf(s *Set) frames.Snapshot {
	h := frames.Snapshot{Epoch: 3, Seq: s.Seq(), CommitTime: s.CommitTime()}
	for _, l := range s.Lanes() {
		ps := l.PageSize
		if ps == 0 {
			ps = DefaultPageSize
		}
		h.Lanes = append(h.Lanes, frames.SnapshotLane{Lane: l.Number, Kind: l.Kind, PageSize: ps,
			Bytes: uint64(l.Pages) * uint64(ps), Checksum: l.Checksum})
	}
	return h
}

// piece is a run of pages of one lane, as one chunk holds them.
type piece struct {
	lane  uint32
	first uint32
	data  []byte
}

// cut splits every lane of s into pieces of 1..maxPages pages, shuffled.
func cut(t *testing.T, s *Set, rng *rand.Rand, maxPages int) []piece {
	t.Helper()
	var out []piece
	for _, l := range s.Lanes() {
		data, err := os.ReadFile(l.Path)
		require.NoError(t, err)
		ps := int(l.PageSize)
		for pg := 0; pg < int(l.Pages); {
			n := min(1+rng.IntN(maxPages), int(l.Pages)-pg)
			out = append(out, piece{lane: l.Number, first: uint32(pg + 1), data: data[pg*ps : (pg+n)*ps]})
			pg += n
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestLoaderBuildsTheSetFromPiecesInAnyOrder(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		src, g := buildSet(t, seed, 80)
		rng := rand.New(rand.NewPCG(seed, 9))
		ld, err := NewLoader(t.TempDir(), headerOf(src), "snap")
		require.NoError(t, err)
		pieces := cut(t, src, rng, 5)
		var wg sync.WaitGroup
		errs := make(chan error, len(pieces))
		for _, p := range pieces {
			wg.Go(func() { errs <- ld.WritePages(p.lane, p.first, p.data) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		s, err := ld.Set()
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		checkSet(t, s, g.m)
		var pages uint64
		for _, l := range s.Lanes() {
			pages += uint64(l.Pages)
		}
		require.Equal(t, pages, s.Stats().PagesLoaded)

		// The Set goes on like any other: the next frames apply.
		for range 20 {
			f := g.next()
			mustApply(t, s, f)
		}
		checkSet(t, s, g.m)
	}
}

// loaderFor returns a Loader for src's state and the pieces of its lanes in
// page order.
func loaderFor(t *testing.T, src *Set, per int) (*Loader, []piece, string) {
	t.Helper()
	dir := t.TempDir()
	ld, err := NewLoader(dir, headerOf(src), "snap-key")
	require.NoError(t, err)
	return ld, cut(t, src, rand.New(rand.NewPCG(1, 1)), per), dir
}

// bigSet is a Set with one lane of 20 pages.
func bigSet(t *testing.T) *Set {
	s := newTestSet(t)
	f := frames.Frame{Epoch: 1, FirstSeq: 1, LastSeq: 1, Lane: 0, Kind: frames.KindInitialize}
	mustApply(t, s, f)
	m := &modelLane{}
	p := frames.Frame{Epoch: 1, FirstSeq: 2, LastSeq: 2, Lane: 0, Kind: frames.KindSQLitePages}
	p.SQLite.PageSize = 512
	for i := uint32(1); i <= 20; i++ {
		p.SQLite.Pages = append(p.SQLite.Pages, frames.Page{Number: i, Data: bytes.Repeat([]byte{byte(i)}, 512)})
	}
	p.SQLite.DatabasePages = 20
	m.pageSize = 512
	for _, pg := range p.SQLite.Pages {
		m.write(pg.Number, pg.Data)
	}
	p.SQLite.After = m.checksum()
	mustApply(t, s, p)
	return s
}

func TestLoaderRefusesAnIncompleteOrWrongLoad(t *testing.T) {
	src := bigSet(t)
	noFiles := func(t *testing.T, dir string) {
		t.Helper()
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, ents, "the lane files of a failed load are removed")
	}
	t.Run("missing", func(t *testing.T) {
		ld, pieces, dir := loaderFor(t, src, 4)
		for _, p := range pieces[1:] {
			require.NoError(t, ld.WritePages(p.lane, p.first, p.data))
		}
		_, err := ld.Set()
		wantErr(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "snap-key")
		noFiles(t, dir)
	})
	t.Run("twice", func(t *testing.T) {
		ld, pieces, dir := loaderFor(t, src, 4)
		for _, p := range pieces[1:] {
			require.NoError(t, ld.WritePages(p.lane, p.first, p.data))
		}
		// A piece written again in place of the one missing: refused at
		// once when it brings the count past the lane's pages, by Set when
		// it does not.
		p := pieces[1]
		err := ld.WritePages(p.lane, p.first, p.data)
		if err == nil {
			_, err = ld.Set()
		} else {
			ld.Abort()
		}
		wantErr(t, err, ErrCorrupt)
		noFiles(t, dir)
	})
	t.Run("past the count", func(t *testing.T) {
		ld, pieces, _ := loaderFor(t, src, 4)
		for _, p := range pieces {
			require.NoError(t, ld.WritePages(p.lane, p.first, p.data))
		}
		wantErr(t, ld.WritePages(pieces[0].lane, pieces[0].first, pieces[0].data), ErrCorrupt)
		s, err := ld.Set()
		require.NoError(t, err, "a refused piece changes nothing")
		require.NoError(t, s.VerifyFiles(t.Context()))
		require.NoError(t, s.Close())
	})
	t.Run("wrong bytes", func(t *testing.T) {
		ld, pieces, dir := loaderFor(t, src, 4)
		for i, p := range pieces {
			data := p.data
			if i == 1 {
				data = bytes.Clone(data)
				data[7] ^= 1
			}
			require.NoError(t, ld.WritePages(p.lane, p.first, data))
		}
		_, err := ld.Set()
		wantErr(t, err, ErrChecksum)
		noFiles(t, dir)
	})
	t.Run("outside", func(t *testing.T) {
		ld, _, _ := loaderFor(t, src, 4)
		wantErr(t, ld.WritePages(0, 20, make([]byte, 1024)), ErrCorrupt)
		wantErr(t, ld.WritePages(0, 0, make([]byte, 512)), ErrCorrupt)
		wantErr(t, ld.WritePages(0, 1, make([]byte, 100)), ErrCorrupt)
		wantErr(t, ld.WritePages(5, 1, make([]byte, 512)), ErrCorrupt)
		ld.Abort()
		wantErr(t, ld.WritePages(0, 1, make([]byte, 512)), ErrBroken)
	})
	t.Run("header", func(t *testing.T) {
		for _, h := range []frames.Snapshot{
			{Lanes: []frames.SnapshotLane{{Lane: 1, Kind: frames.LaneSQLitePages, PageSize: 512}, {Lane: 1, Kind: frames.LaneSQLitePages, PageSize: 512}}},
			{Lanes: []frames.SnapshotLane{{Lane: 0, Kind: 9, PageSize: 512}}},
			{Lanes: []frames.SnapshotLane{{Lane: 0, Kind: frames.LaneSQLitePages, PageSize: 500}}},
			{Lanes: []frames.SnapshotLane{{Lane: 0, Kind: frames.LaneSQLitePages, PageSize: 512, Bytes: 700}}},
			{Lanes: []frames.SnapshotLane{{Lane: 0, Kind: frames.LaneSQLitePages, PageSize: 512, Checksum: 1}}},
		} {
			dir := t.TempDir()
			_, err := NewLoader(dir, h, "k")
			require.Error(t, err, "%+v", h)
			noFiles(t, dir)
		}
	})
}

func TestReadPagesChecksEveryPageAgainstTheTracker(t *testing.T) {
	s := bigSet(t)
	srcs, err := s.Sources()
	require.NoError(t, err)
	require.Len(t, srcs, 1)
	src := srcs[0]
	buf := make([]byte, 4*512)
	require.NoError(t, ReadPages(src, 5, buf))
	require.Equal(t, bytes.Repeat([]byte{5}, 512), buf[:512])
	require.Equal(t, bytes.Repeat([]byte{8}, 512), buf[3*512:])

	wantErr(t, ReadPages(src, 18, buf), ErrCorrupt) // past the end
	wantErr(t, ReadPages(src, 0, buf[:512]), ErrCorrupt)
	wantErr(t, ReadPages(src, 1, buf[:100]), ErrCorrupt)

	// A page changed behind the tracker's back is refused, named.
	l, _ := s.Lane(0)
	f, err := os.OpenFile(l.Path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, 6*512+3)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = ReadPages(src, 5, buf)
	wantErr(t, err, ErrChecksum)
	require.ErrorContains(t, err, "page 7")
	require.NoError(t, ReadPages(src, 1, buf), "pages 1..4 are untouched")
}
