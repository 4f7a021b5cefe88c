package lanes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

func initialize(seq frames.Seq, lane uint32) frames.Frame {
	return frames.Frame{Epoch: 1, FirstSeq: seq, LastSeq: seq, Lane: lane, Kind: frames.KindInitialize}
}

// pagesFrame builds a sqlitePages frame from before's state: it writes
// pages (number -> fill byte) and sets the size.
func pagesFrame(seq frames.Seq, lane uint32, m *modelLane, pageSize, size uint32, writes map[uint32]byte) frames.Frame {
	f := frames.Frame{Epoch: 1, FirstSeq: seq, LastSeq: seq, Lane: lane, CommitTime: int64(seq) * 10, Kind: frames.KindSQLitePages}
	p := &f.SQLite
	p.PageSize, p.DatabasePages, p.Before = pageSize, size, m.checksum()
	for pgno := uint32(1); pgno <= size; pgno++ {
		if b, ok := writes[pgno]; ok {
			p.Pages = append(p.Pages, frames.Page{Number: pgno, Data: bytes.Repeat([]byte{b}, int(pageSize))})
		}
	}
	m.pageSize = pageSize
	for _, pg := range p.Pages {
		m.write(pg.Number, pg.Data)
	}
	m.resize(size)
	p.After = m.checksum()
	return f
}

func TestGap(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	f1 := initialize(1, 0)
	f2 := pagesFrame(2, 0, m, 4096, 2, map[uint32]byte{1: 1, 2: 2})
	f3 := pagesFrame(3, 0, m, 4096, 2, map[uint32]byte{2: 3})
	f4 := pagesFrame(4, 0, m, 4096, 3, map[uint32]byte{3: 4})
	mustApply(t, s, f1)

	err := s.Apply(&f4)
	wantErr(t, err, ErrGap)
	var gap *GapError
	require.ErrorAs(t, err, &gap)
	require.Equal(t, frames.Seq(2), gap.From, "gap %+v", gap)
	require.Equal(t, frames.Seq(3), gap.To, "gap %+v", gap)
	if !strings.Contains(err.Error(), "sequence numbers 2..3 are missing") || !strings.Contains(err.Error(), "frame 4..4") {
		t.Fatalf("error %q does not name the missing range and the frame", err)
	}
	// Nothing changed: the missing frames still apply.
	mustApply(t, s, f2, f3, f4)
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: m}, seq: 4, time: 40})

	f6 := initialize(6, 0)
	err = s.Apply(&f6)
	if !errors.As(err, &gap) || gap.From != 5 || gap.To != 5 || !strings.Contains(err.Error(), "sequence number 5 is missing") {
		t.Fatalf("error %v, want frame 5 missing", err)
	}
}

func TestSkip(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	f1 := initialize(1, 0)
	f2 := pagesFrame(2, 0, m, 4096, 2, map[uint32]byte{1: 1, 2: 2})
	f3 := pagesFrame(3, 0, m, 4096, 1, map[uint32]byte{1: 9})
	mustApply(t, s, f1, f2, f3)
	// Covered frames, even ones that would no longer apply (f2's checksum
	// before is stale), are skipped without a look at their content.
	f2.SQLite.After ^= 1
	mustApply(t, s, f1, f2, f3)
	st := s.Stats()
	require.Equal(t, uint64(3), st.Skipped, "stats %+v", st)
	require.Equal(t, uint64(3), st.Frames, "stats %+v", st)
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: m}, seq: 3, time: 30})
}

func TestChainBreak(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	f2 := pagesFrame(2, 0, m, 1024, 3, map[uint32]byte{1: 1, 2: 2, 3: 3})
	good := *m.clone()
	f3 := pagesFrame(3, 0, m, 1024, 3, map[uint32]byte{2: 7})
	mustApply(t, s, initialize(1, 0), f2)

	bad := f3
	bad.SQLite.Before ^= 0xff
	err := s.Apply(&bad)
	wantErr(t, err, ErrChecksum)
	for _, want := range []string{bad.SQLite.Before.String(), f3.SQLite.Before.String(), "frame 3..3", "chain"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	// Detected before writing: the Set is unchanged and usable.
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: &good}, seq: 2, time: 20})
	mustApply(t, s, f3)
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: m}, seq: 3, time: 30})
}

func TestWrongAfter(t *testing.T) {
	for _, parts := range []int{1, 2} {
		t.Run(fmt.Sprintf("parts=%d", parts), func(t *testing.T) {
			s := newTestSet(t)
			m := &modelLane{}
			f2 := pagesFrame(2, 0, m, 512, 4, map[uint32]byte{1: 1, 2: 2, 3: 3, 4: 4})
			f2.SQLite.After ^= 1 << 40
			mustApply(t, s, initialize(1, 0))
			var err error
			for _, p := range splitParts(f2, 4/parts) {
				if err = s.Apply(&p); err != nil {
					break
				}
			}
			wantErr(t, err, ErrChecksum)
			if !strings.Contains(err.Error(), f2.SQLite.After.String()) {
				t.Fatalf("error %q does not name the checksum after", err)
			}
			// The pages are written: the Set no longer describes any sequence.
			wantErr(t, s.Apply(&f2), ErrBroken, ErrChecksum)
			wantErr(t, s.Sync(), ErrBroken)
			wantErr(t, s.Err(), ErrBroken)
		})
	}
}

func TestPageSize(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	f1 := initialize(1, 0)
	f2 := pagesFrame(2, 0, m, 4096, 1, map[uint32]byte{1: 1})
	mustApply(t, s, f1, f2)

	// Same checksum before as the lane, other page size.
	f3 := pagesFrame(3, 0, m.clone(), 8192, 1, map[uint32]byte{1: 2})
	err := s.Apply(&f3)
	wantErr(t, err, ErrCorrupt)
	if !strings.Contains(err.Error(), "page size 8192, lane 0 has 4096") {
		t.Fatalf("error %q", err)
	}

	// Emptied, the lane takes any page size.
	m2 := &modelLane{}
	f3 = initialize(3, 0)
	f4 := pagesFrame(4, 0, m2, 8192, 2, map[uint32]byte{2: 5})
	mustApply(t, s, f3, f4)
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: m2}, seq: 4, time: 40})
	l, _ := s.Lane(0)
	require.Equal(t, uint32(8192), l.PageSize, "page size")
}

func TestLaneRules(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	pages := pagesFrame(1, 3, m, 512, 1, map[uint32]byte{1: 1})
	wantErr(t, s.Apply(&pages), ErrCorrupt) // no lane 3: frames never create lanes

	newLane := frames.Frame{FirstSeq: 1, LastSeq: 1, Lane: 3, Kind: frames.KindNewLane, NewLane: frames.LaneSQLitePages}
	mustApply(t, s, newLane)
	pages.FirstSeq, pages.LastSeq = 2, 2
	mustApply(t, s, pages)
	path := filepath.Join(s.Dir(), "lane-3.db")
	if l, ok := s.Lane(3); !ok || l.Path != path || l.Pages != 1 {
		t.Fatalf("lane 3: %+v", l)
	}

	again := newLane
	again.FirstSeq, again.LastSeq = 3, 3
	wantErr(t, s.Apply(&again), ErrCorrupt) // exists

	unknown := again
	unknown.NewLane = 9
	wantErr(t, s.Apply(&unknown), frames.ErrUnknownKind)

	del := frames.Frame{FirstSeq: 3, LastSeq: 3, Lane: 3, Kind: frames.KindDeleteLane}
	mustApply(t, s, del)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("lane file still there: %v", err)
	}
	del.FirstSeq, del.LastSeq = 4, 4
	wantErr(t, s.Apply(&del), ErrCorrupt) // no lane 3 any more

	// initialize creates a missing lane, and empties an existing one.
	mustApply(t, s, initialize(4, 5))
	m5 := &modelLane{}
	mustApply(t, s, pagesFrame(5, 5, m5, 2048, 3, map[uint32]byte{3: 3}))
	mustApply(t, s, initialize(6, 5))
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{5: {}}, seq: 6})

	// A lane file left in the directory is not adopted.
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), "lane-8.db"), []byte("x"), 0o644))
	err := s.Apply(&frames.Frame{FirstSeq: 7, LastSeq: 7, Lane: 8, Kind: frames.KindInitialize})
	if !errors.Is(err, os.ErrExist) {
		t.Fatalf("error %v, want the file to exist", err)
	}
	require.NoError(t, s.Err(), "failure before any change broke the set")
	require.Equal(t, frames.Seq(6), s.Seq(), "failure before any change broke the set")
}

func TestMaxLanes(t *testing.T) {
	s := newTestSet(t)
	for i := uint32(0); i < MaxLanes; i++ {
		mustApply(t, s, initialize(frames.Seq(i)+1, i))
	}
	wantErr(t, s.Apply(&frames.Frame{FirstSeq: MaxLanes + 1, LastSeq: MaxLanes + 1, Lane: MaxLanes, Kind: frames.KindNewLane, NewLane: frames.LaneSQLitePages}), ErrCorrupt)
}

// Overlapping lane frames ask only for their end state.
func TestOverlapLaneFrames(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	mustApply(t, s, initialize(1, 0), frames.Frame{FirstSeq: 2, LastSeq: 2, Lane: 1, Kind: frames.KindNewLane, NewLane: frames.LaneSQLitePages})
	mustApply(t, s, pagesFrame(3, 1, m, 512, 2, map[uint32]byte{1: 1, 2: 2}))
	// 2..4 "newLane 1" over a Set at 3: lane 1 ends up new and empty.
	mustApply(t, s, frames.Frame{FirstSeq: 2, LastSeq: 4, Lane: 1, Kind: frames.KindNewLane, NewLane: frames.LaneSQLitePages})
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: {}, 1: {}}, seq: 4})
	mustApply(t, s, frames.Frame{FirstSeq: 5, LastSeq: 5, Lane: 1, Kind: frames.KindDeleteLane})
	// 5..6 "deleteLane 1" over a Set at 5 where it is gone already.
	mustApply(t, s, frames.Frame{FirstSeq: 5, LastSeq: 6, Lane: 1, Kind: frames.KindDeleteLane})
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: {}}, seq: 6})
}

func TestGrowthBound(t *testing.T) {
	const ps = 512
	t.Run("size", func(t *testing.T) {
		s := newTestSet(t)
		m := &modelLane{}
		mustApply(t, s, initialize(1, 0), pagesFrame(2, 0, m, ps, 1, map[uint32]byte{1: 1}))
		// The bound itself is allowed (a frame of zero pages).
		ok := pagesFrame(3, 0, m.clone(), ps, 1+MaxUnwrittenPages, nil)
		over := pagesFrame(3, 0, m.clone(), ps, 2+MaxUnwrittenPages, nil)
		err := s.Apply(&over)
		wantErr(t, err, ErrCorrupt)
		l, _ := s.Lane(0)
		require.Equal(t, uint32(1), l.Pages, "refused frame changed the set: %+v", l)
		require.NoError(t, s.Err(), "refused frame changed the set: %+v", l)
		mustApply(t, s, ok)
		if l, _ := s.Lane(0); l.Pages != 1+MaxUnwrittenPages {
			t.Fatalf("%d pages", l.Pages)
		}
		st := s.Stats()
		require.Equal(t, uint64(MaxUnwrittenPages), st.UnwrittenPages, "stats %+v", st)
		// The Set's budget is spent: more zero pages need pages received.
		next := pagesFrame(4, 0, &modelLane{pageSize: ps, data: make([]byte, 0)}, ps, 0, nil)
		next.SQLite.Before, next.SQLite.DatabasePages = ok.SQLite.After, 3+MaxUnwrittenPages // 2 more: 1 page received
		wantErr(t, s.Apply(&next), ErrCorrupt)
	})
	t.Run("hole", func(t *testing.T) {
		s := newTestSet(t)
		mustApply(t, s, initialize(1, 0))
		// A page written at the far end of a 4-billion-page database: one
		// page of input must not cost 4 billion hashes.
		far := frames.Frame{FirstSeq: 2, LastSeq: 2, Kind: frames.KindSQLitePages, SQLite: frames.SQLitePages{
			PageSize: ps, DatabasePages: frames.MaxDatabasePages,
			Pages: []frames.Page{{Number: frames.MaxDatabasePages, Data: make([]byte, ps)}}}}
		wantErr(t, s.Apply(&far), ErrCorrupt)
		// Split over parts, the frame's holes add up.
		m := &modelLane{}
		f := pagesFrame(2, 0, m, ps, 80000, map[uint32]byte{40000: 1, 80000: 2})
		parts := splitParts(f, 1)
		mustApply(t, s, parts[0])
		wantErr(t, s.Apply(&parts[1]), ErrCorrupt)
		wantErr(t, s.Err(), ErrBroken) // the first part was written
	})
}

func TestTrackerBounds(t *testing.T) {
	tr, err := NewTracker(512)
	require.NoError(t, err)
	wantErr(t, tr.Write(MaxUnwrittenPages+2, make([]byte, 512)), ErrCorrupt)
	wantErr(t, tr.Resize(MaxUnwrittenPages+1), ErrCorrupt)
	wantErr(t, tr.Write(1, make([]byte, 511)), ErrCorrupt)
	wantErr(t, tr.Write(0, make([]byte, 512)), ErrCorrupt)
	require.Equal(t, uint32(0), tr.Pages(), "refused calls changed the tracker")
	require.Equal(t, frames.Checksum(0), tr.Checksum(), "refused calls changed the tracker")
	_, err = NewTracker(1000)
	require.ErrorIs(t, err, ErrCorrupt, "page size 1000 accepted")
	var zero Tracker
	wantErr(t, zero.Write(1, make([]byte, 512)), ErrCorrupt)
	wantErr(t, zero.Resize(1), ErrCorrupt)
}

// Frames that did not come from a decoder are checked as a decoder would.
func TestHostileFrames(t *testing.T) {
	s := newTestSet(t)
	mustApply(t, s, initialize(1, 0))
	page := make([]byte, 512)
	base := frames.Frame{FirstSeq: 2, LastSeq: 2, Kind: frames.KindSQLitePages,
		SQLite: frames.SQLitePages{PageSize: 512, DatabasePages: 2}}
	for name, mutate := range map[string]func(f *frames.Frame){
		"seq 0":      func(f *frames.Frame) { f.FirstSeq = 0 },
		"backwards":  func(f *frames.Frame) { f.LastSeq = 1 },
		"page size":  func(f *frames.Frame) { f.SQLite.PageSize = 500 },
		"short page": func(f *frames.Frame) { f.SQLite.Pages = []frames.Page{{Number: 1, Data: page[:100]}} },
		"nil page":   func(f *frames.Frame) { f.SQLite.Pages = []frames.Page{{Number: 1}} },
		"page 0":     func(f *frames.Frame) { f.SQLite.Pages = []frames.Page{{Number: 0, Data: page}} },
		"past size":  func(f *frames.Frame) { f.SQLite.Pages = []frames.Page{{Number: 3, Data: page}} },
		"not ascending": func(f *frames.Frame) {
			f.SQLite.Pages = []frames.Page{{Number: 2, Data: page}, {Number: 1, Data: page}}
		},
		"duplicate": func(f *frames.Frame) {
			f.SQLite.Pages = []frames.Page{{Number: 1, Data: page}, {Number: 1, Data: page}}
		},
		"too many pages":  func(f *frames.Frame) { f.SQLite.DatabasePages = frames.MaxDatabasePages + 1 },
		"unknown kind":    func(f *frames.Frame) { f.Kind = 9 },
		"unknown lane":    func(f *frames.Frame) { f.Lane = 1 },
		"new lane kind 0": func(f *frames.Frame) { f.Kind, f.Lane = frames.KindNewLane, 1 },
	} {
		t.Run(name, func(t *testing.T) {
			f := base
			mutate(&f)
			require.Error(t, s.Apply(&f), "accepted")
			require.NoError(t, s.Err(), "refused frame changed the set")
			require.Equal(t, frames.Seq(1), s.Seq(), "refused frame changed the set")
		})
	}
	require.ErrorIs(t, s.Apply(nil), ErrCorrupt, "nil frame")
}

// The parts of a continued frame must follow each other.
func TestContinuedParts(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	f := pagesFrame(2, 0, m, 512, 4, map[uint32]byte{1: 1, 2: 2, 3: 3, 4: 4})
	parts := splitParts(f, 2)
	mustApply(t, s, initialize(1, 0), parts[0])
	if s.Seq() != 1 {
		t.Fatalf("seq %d moved before the last part", s.Seq())
	}
	_, err := s.WriteSnapshot(t.Context(), &bytes.Buffer{}, 1, frames.WriteOptions{})
	require.ErrorIs(t, err, ErrCorrupt, "snapshot of a half-applied frame")
	wantErr(t, s.VerifyFiles(t.Context()), ErrCorrupt)
	other := initialize(3, 1)
	wantErr(t, s.Apply(&other), ErrCorrupt)
	wantErr(t, s.Apply(&parts[1]), ErrBroken)

	// Pages must ascend across parts.
	s = newTestSet(t)
	mustApply(t, s, initialize(1, 0), parts[0])
	again := parts[1]
	again.SQLite.Pages = parts[0].SQLite.Pages
	wantErr(t, s.Apply(&again), ErrCorrupt)
}

func TestClosed(t *testing.T) {
	s := newTestSet(t)
	mustApply(t, s, initialize(1, 0))
	require.NoError(t, s.Close())
	f := initialize(2, 0)
	wantErr(t, s.Apply(&f), ErrBroken)
	require.NoError(t, s.Close())
	_, err := NewSet(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err, "NewSet of a missing directory")
}
