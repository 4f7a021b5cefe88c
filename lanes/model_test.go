package lanes

import (
	"fmt"
	"testing"

	"github.com/framectl/framectl/frames"
)

// TestModel applies random sequences of frames of every kind, some split
// into continued parts, and compares the files with an in-memory model
// after every few frames.
func TestModel(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := newGen(seed)
			s := newTestSet(t)
			var all []frames.Frame
			messages := 0
			for i := 0; i < 300; i++ {
				f := g.next()
				all = append(all, f)
				parts := splitParts(f, 1+g.rng.IntN(6))
				messages += len(parts)
				mustApply(t, s, parts...)
				if i%25 == 0 {
					checkSet(t, s, g.m)
				}
			}
			checkSet(t, s, g.m)
			st := s.Stats()
			if st.Frames != uint64(messages) || st.Skipped != 0 || st.Overlapping != 0 {
				t.Fatalf("stats %+v, want %d frame messages applied", st, messages)
			}

			// Everything again: all covered, nothing changes.
			mustApply(t, s, all...)
			checkSet(t, s, g.m)
			if st := s.Stats(); st.Skipped != uint64(len(all)) || st.Frames != uint64(messages) {
				t.Fatalf("stats %+v after re-applying %d frames", st, len(all))
			}
		})
	}
}

// history is a run of single-sequence sqlitePages commits on lane 0 (after
// an initialize at 1), with the model state after each: states[i] is the
// lane after frame i.
type history struct {
	frames  []frames.Frame // frames[i] has sequence i+1
	states  []*modelLane   // states[0] is before frame 1
	written [][]uint32     // written[i]: pages frame i+1 wrote
}

func newHistory(seed uint64, n int) *history {
	g := newGen(seed)
	g.lanes, g.span = 1, 1
	// A lane holding pages never changes page size, so a batch never
	// merges across a change: keep one size.
	g.pageSizes = g.pageSizes[:1+int(seed%3)][int(seed%3):]
	h := &history{states: []*modelLane{{}}}
	h.frames = append(h.frames, g.next()) // initialize
	h.states = append(h.states, g.m.lanes[0].clone())
	h.written = append(h.written, nil)
	for len(h.frames) < n {
		h.frames = append(h.frames, g.pagesFrame(0))
		h.states = append(h.states, g.m.lanes[0].clone())
		h.written = append(h.written, append([]uint32(nil), g.written...))
	}
	return h
}

// merged returns what a batch writer makes of frames a..b (a >= 2): one
// frame holding the newest version of every page that may differ from the
// state at a-1, which is every page written in the range and every page
// that was cut by a truncation in it and exists again at b.
func (h *history) merged(a, b int) frames.Frame {
	end := h.states[b]
	minSize := end.pages()
	for i := a - 1; i <= b; i++ {
		minSize = min(minSize, h.states[i].pages())
	}
	pages := map[uint32]bool{}
	for i := a; i <= b; i++ {
		for _, p := range h.written[i-1] {
			pages[p] = true
		}
	}
	f := h.frames[b-1]
	f.FirstSeq = frames.Seq(a)
	f.SQLite.Before = h.states[a-1].checksum()
	f.SQLite.Pages = nil
	ps := int(end.pageSize)
	for p := uint32(1); p <= end.pages(); p++ {
		if pages[p] || p > minSize {
			f.SQLite.Pages = append(f.SQLite.Pages, frames.Page{Number: p, Data: end.data[int(p-1)*ps : int(p)*ps]})
		}
	}
	return f
}

// TestOverlap applies merged frames over states anywhere in their range:
// the result is the state at their end, and later frames chain on.
func TestOverlap(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		h := newHistory(seed, 30)
		g := newGen(seed * 977)
		a := 2 + g.rng.IntN(20)
		b := a + 1 + g.rng.IntN(len(h.frames)-a)
		k := a - 1 + g.rng.IntN(b-a+1) // Seq before the merged frame: a-1..b-1
		t.Run(fmt.Sprintf("seed=%d/merged=%d..%d/at=%d", seed, a, b, k), func(t *testing.T) {
			s := newTestSet(t)
			mustApply(t, s, h.frames[:k]...)
			mf := h.merged(a, b)
			mustApply(t, s, splitParts(mf, 1+g.rng.IntN(4))...)
			want := &model{lanes: map[uint32]*modelLane{0: h.states[b]}, seq: frames.Seq(b), time: h.frames[b-1].CommitTime}
			checkSet(t, s, want)
			if overlapping := s.Stats().Overlapping; (k >= a) != (overlapping == 1) {
				t.Fatalf("%d frames counted overlapping", overlapping)
			}
			mustApply(t, s, h.frames[b:]...)
			last := len(h.frames)
			want = &model{lanes: map[uint32]*modelLane{0: h.states[last]}, seq: frames.Seq(last), time: h.frames[last-1].CommitTime}
			checkSet(t, s, want)
		})
	}
}

// A merged frame overlapping the Set still has its checksum after checked.
func TestOverlapWrongAfter(t *testing.T) {
	h := newHistory(3, 12)
	s := newTestSet(t)
	mustApply(t, s, h.frames[:6]...)
	mf := h.merged(4, 10)
	mf.SQLite.After ^= 1
	wantErr(t, s.Apply(&mf), ErrChecksum)
	wantErr(t, s.Apply(&h.frames[6]), ErrBroken, ErrChecksum)
}
