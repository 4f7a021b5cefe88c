package lanes

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// modelLane is the reference for one lane: its bytes, in memory.
type modelLane struct {
	pageSize uint32
	data     []byte
}

func (m *modelLane) pages() uint32 {
	if m.pageSize == 0 {
		return 0
	}
	return uint32(len(m.data) / int(m.pageSize))
}

// checksum recomputes the rolling checksum from scratch, independently of
// Tracker.
func (m *modelLane) checksum() frames.Checksum {
	if len(m.data) == 0 {
		return 0
	}
	c, _, err := frames.DatabaseChecksum(bytes.NewReader(m.data), int(m.pageSize))
	if err != nil {
		panic(err)
	}
	return c
}

func (m *modelLane) clone() *modelLane {
	return &modelLane{pageSize: m.pageSize, data: slices.Clone(m.data)}
}

// resize truncates or zero-extends the model.
func (m *modelLane) resize(pages uint32) {
	n := int(pages) * int(m.pageSize)
	if n <= len(m.data) {
		m.data = m.data[:n]
		return
	}
	m.data = append(m.data, make([]byte, n-len(m.data))...)
}

func (m *modelLane) write(pgno uint32, page []byte) {
	if pgno > m.pages() {
		m.resize(pgno)
	}
	copy(m.data[int(pgno-1)*int(m.pageSize):], page)
}

// model is the reference for a Set.
type model struct {
	lanes map[uint32]*modelLane
	seq   frames.Seq
	time  int64
}

func newModel() *model { return &model{lanes: map[uint32]*modelLane{}} }

// applyPages applies a whole sqlitePages frame to the model (the frame is
// built from the model, so it is valid).
func (m *model) applyPages(f *frames.Frame) {
	l := m.lanes[f.Lane]
	l.pageSize = f.SQLite.PageSize
	for _, p := range f.SQLite.Pages {
		l.write(p.Number, p.Data)
	}
	l.resize(f.SQLite.DatabasePages)
}

// gen produces a random, valid sequence of frames over a model.
type gen struct {
	rng       *rand.Rand
	m         *model
	lanes     uint32 // lanes 0..lanes-1 are used
	pageSizes []uint32
	maxPages  uint32
	span      int // frames cover 1..span sequence numbers
	overwrite int // a frame overwrites one existing page in overwrite
	written   []uint32
}

func newGen(seed uint64) *gen {
	return &gen{
		rng:       rand.New(rand.NewPCG(seed, 0x1a7e5)),
		m:         newModel(),
		lanes:     4,
		pageSizes: []uint32{512, 1024, 4096},
		maxPages:  24,
		span:      3,
		overwrite: 3,
	}
}

func (g *gen) header(lane uint32, kind frames.Kind) frames.Frame {
	first := g.m.seq + 1
	last := first + frames.Seq(g.rng.IntN(g.span))
	g.m.seq = last
	g.m.time += 1 + int64(g.rng.IntN(1000))
	return frames.Frame{Epoch: 7, FirstSeq: first, LastSeq: last, Lane: lane, CommitTime: g.m.time, Kind: kind}
}

// page returns page contents of a random shape: zeros, one repeated byte,
// or random bytes.
func (g *gen) page(size uint32) []byte {
	p := make([]byte, size)
	switch g.rng.IntN(4) {
	case 0:
	case 1:
		b := byte(g.rng.IntN(256))
		for i := range p {
			p[i] = b
		}
	default:
		for i := range p {
			p[i] = byte(g.rng.Uint32())
		}
	}
	return p
}

// pagesFrame returns a sqlitePages frame for lane and applies it to the
// model: random overwrites, growth (with an occasional unwritten page),
// truncation.
func (g *gen) pagesFrame(lane uint32) frames.Frame {
	l := g.m.lanes[lane]
	f := g.header(lane, frames.KindSQLitePages)
	p := &f.SQLite
	p.PageSize = l.pageSize
	if l.pages() == 0 && (l.pageSize == 0 || g.rng.IntN(2) == 0) {
		p.PageSize = g.pageSizes[g.rng.IntN(len(g.pageSizes))]
	}
	p.Before = l.checksum()
	cur := l.pages()
	size := cur
	switch g.rng.IntN(6) {
	case 0, 1:
		size = min(g.maxPages, cur+1+uint32(g.rng.IntN(5)))
	case 2:
		if cur > 0 {
			size = uint32(g.rng.IntN(int(cur)))
		}
	}
	g.written = g.written[:0]
	for pgno := uint32(1); pgno <= size; pgno++ {
		grown := pgno > cur
		if (grown && g.rng.IntN(8) != 0) || (!grown && g.rng.IntN(g.overwrite) == 0) {
			p.Pages = append(p.Pages, frames.Page{Number: pgno, Data: g.page(p.PageSize)})
			g.written = append(g.written, pgno)
		}
	}
	p.DatabasePages = size
	g.m.applyPages(&f)
	p.After = l.checksum()
	return f
}

// next returns the next random frame of any kind, applied to the model.
func (g *gen) next() frames.Frame {
	if len(g.m.lanes) == 0 {
		f := g.header(0, frames.KindInitialize)
		g.m.lanes[0] = &modelLane{}
		return f
	}
	lane := uint32(g.rng.IntN(int(g.lanes)))
	if g.rng.IntN(2) == 0 {
		lane = 0
	}
	_, exists := g.m.lanes[lane]
	switch r := g.rng.IntN(20); {
	case !exists && r < 10:
		f := g.header(lane, frames.KindNewLane)
		f.NewLane = frames.LaneSQLitePages
		g.m.lanes[lane] = &modelLane{}
		return f
	case r == 0 || !exists:
		f := g.header(lane, frames.KindInitialize)
		ps := uint32(0)
		if l := g.m.lanes[lane]; l != nil {
			ps = l.pageSize
		}
		g.m.lanes[lane] = &modelLane{pageSize: ps}
		return f
	case r == 1 && lane != 0:
		f := g.header(lane, frames.KindDeleteLane)
		delete(g.m.lanes, lane)
		return f
	}
	return g.pagesFrame(lane)
}

// splitParts cuts a frame into continued parts of at most per pages, as a
// batch reader would hand them out.
func splitParts(f frames.Frame, per int) []frames.Frame {
	if f.Kind != frames.KindSQLitePages || len(f.SQLite.Pages) <= per {
		return []frames.Frame{f}
	}
	var parts []frames.Frame
	pages := f.SQLite.Pages
	for len(pages) > 0 {
		n := min(per, len(pages))
		part := f
		part.SQLite.Pages = pages[:n]
		pages = pages[n:]
		part.SQLite.Continued = len(pages) > 0
		parts = append(parts, part)
	}
	return parts
}

func newTestSet(t testing.TB) *Set {
	t.Helper()
	s, err := NewSet(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func mustApply(t testing.TB, s *Set, fs ...frames.Frame) {
	t.Helper()
	for i := range fs {
		require.NoError(t, s.Apply(&fs[i]), "apply %s", fs[i].String())
	}
}

// checkSet compares every lane of s with the model, byte for byte, and
// runs VerifyFiles.
func checkSet(t testing.TB, s *Set, m *model) {
	t.Helper()
	if s.Seq() != m.seq || s.CommitTime() != m.time {
		t.Fatalf("set at seq %d time %d, model at %d time %d", s.Seq(), s.CommitTime(), m.seq, m.time)
	}
	got := s.Lanes()
	if len(got) != len(m.lanes) {
		t.Fatalf("set has %d lanes, model %d", len(got), len(m.lanes))
	}
	for _, l := range got {
		ml, ok := m.lanes[l.Number]
		if !ok {
			t.Fatalf("set has lane %d, model does not", l.Number)
		}
		if l.Pages != ml.pages() || (l.Pages > 0 && l.PageSize != ml.pageSize) {
			t.Fatalf("lane %d: %d pages of %d, model %d of %d", l.Number, l.Pages, l.PageSize, ml.pages(), ml.pageSize)
		}
		if want := ml.checksum(); l.Checksum != want {
			t.Fatalf("lane %d: checksum %s, model %s", l.Number, l.Checksum, want)
		}
		data, err := os.ReadFile(l.Path)
		require.NoError(t, err)
		if !bytes.Equal(data, ml.data) {
			t.Fatalf("lane %d: file (%d bytes) differs from the model (%d bytes)", l.Number, len(data), len(ml.data))
		}
	}
	require.NoError(t, s.VerifyFiles(context.Background()))
}

func wantErr(t testing.TB, err error, targets ...error) {
	t.Helper()
	require.Error(t, err, "no error, want %v", targets)
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %q does not match %v", err, target)
		}
	}
}
