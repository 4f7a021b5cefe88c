package lanes

import (
	"github.com/framectl/framectl/frames"
)

// partial is a continued frame being applied: the fields every part
// repeats, and where the parts so far left off.
type partial struct {
	frames.Frame        // header fields only; SQLite.Pages is nil
	lastPage     uint32 // last page number of the parts so far
	unwritten    uint32 // zero pages the parts so far added
}

// Apply applies one frame message (a whole frame, or one part of a
// continued frame) to the Set:
//
//   - a frame the Set already covers (LastSeq <= Seq) is skipped;
//   - a frame starting past Seq+1 is a gap: a *GapError (ErrGap) naming the
//     missing range, and the Set is unchanged;
//   - a frame starting at Seq+1 applies with its checksum before checked
//     against the lane (ErrChecksum when the chain is broken);
//   - a wider frame overlapping Seq (FirstSeq <= Seq < LastSeq), such as a
//     batch that merged commits the Set already has, applies too: it holds
//     the newest version of every page that may differ from the state at
//     FirstSeq-1, so applying it to any state in its range yields the state
//     at LastSeq; its checksum before describes FirstSeq-1, so it is not
//     checked, but its checksum after is.
//
// "Every page that may differ" is the rule a batch writer merging commits
// must follow: every page written in the range, and every page that a
// truncation inside the range cut and that exists again at LastSeq (written
// or not since: a page regrown without a write is zeros, and only an
// explicit page says so). A merge never spans a page size change.
//
// sqlitePages writes the pages; the last part (Continued false) sets the
// lane's size and checks the checksum after (ErrChecksum). Parts of a
// continued frame must follow each other; Seq moves to LastSeq when the last
// part is applied. See the package comment for the lane kinds' rules.
//
// The Set is unchanged by any error returned before something was written
// (a gap, a broken chain, a frame that cannot apply); an error after that
// makes it unusable (ErrBroken). Apply checks every field it uses, so a
// frame that did not come from a frames decoder cannot do more harm than
// one that did.
func (s *Set) Apply(f *frames.Frame) error {
	_, err := s.apply(f)
	return err
}

// apply is Apply, also reporting whether the Set changed (the frame was
// neither skipped nor refused before writing).
func (s *Set) apply(f *frames.Frame) (changed bool, err error) {
	if err := s.usable("apply"); err != nil {
		return false, err
	}
	if f == nil {
		return false, &Error{Op: "apply", Err: corrupt("nil frame")}
	}
	wrap := func(err error) error {
		return &Error{Op: "apply", FirstSeq: f.FirstSeq, LastSeq: f.LastSeq, Err: err}
	}
	if err := checkFrame(f); err != nil {
		if s.part != nil {
			return true, s.fail(wrap(err))
		}
		return false, wrap(err)
	}
	if s.part != nil {
		if err := s.applyNextPart(f); err != nil {
			return true, s.fail(wrap(err))
		}
		s.finish(f)
		return true, nil
	}
	if f.LastSeq <= s.seq {
		s.stats.Skipped++
		return false, nil
	}
	if f.FirstSeq > s.seq+1 {
		return false, wrap(&GapError{From: s.seq + 1, To: f.FirstSeq - 1})
	}
	overlap := f.FirstSeq <= s.seq
	switch f.Kind {
	case frames.KindSQLitePages:
		changed, err = s.applyFirstPart(f, overlap)
	case frames.KindNewLane:
		changed, err = s.applyNewLane(f, overlap)
	case frames.KindInitialize:
		changed, err = s.applyInitialize(f)
	case frames.KindDeleteLane:
		changed, err = s.applyDeleteLane(f, overlap)
	}
	if err != nil {
		err = wrap(err)
		if changed {
			return true, s.fail(err)
		}
		return false, err
	}
	if overlap {
		s.stats.Overlapping++
	}
	s.finish(f)
	return true, nil
}

// finish records a frame message applied: Seq moves once a frame is whole.
func (s *Set) finish(f *frames.Frame) {
	s.stats.Frames++
	if s.part == nil {
		s.seq, s.commitTime = f.LastSeq, f.CommitTime
	}
}

// checkFrame checks a frame on its own, as the frames decoder does, so that
// nothing below trusts a length or a number it did not check.
func checkFrame(f *frames.Frame) error {
	if f.FirstSeq == 0 || f.LastSeq < f.FirstSeq {
		return corrupt("invalid sequence range %d..%d", f.FirstSeq, f.LastSeq)
	}
	switch f.Kind {
	case frames.KindSQLitePages:
		p := &f.SQLite
		if !frames.ValidPageSize(p.PageSize) {
			return corrupt("page size %d is not a power of two in 512..65536", p.PageSize)
		}
		if p.DatabasePages > frames.MaxDatabasePages {
			return corrupt("database size %d pages exceeds SQLite's maximum", p.DatabasePages)
		}
		prev := uint32(0)
		for i := range p.Pages {
			pg := &p.Pages[i]
			switch {
			case pg.Number <= prev:
				return corrupt("page numbers not strictly ascending (%d after %d)", pg.Number, prev)
			case pg.Number > p.DatabasePages:
				return corrupt("page %d past the database size %d", pg.Number, p.DatabasePages)
			case len(pg.Data) != int(p.PageSize):
				return corrupt("page %d has %d bytes, page size is %d", pg.Number, len(pg.Data), p.PageSize)
			}
			prev = pg.Number
		}
	case frames.KindNewLane:
		if f.NewLane != frames.LaneSQLitePages {
			return unknownKind("new lane %d of unknown kind %s", f.Lane, f.NewLane)
		}
	case frames.KindInitialize, frames.KindDeleteLane:
	default:
		return unknownKind("unknown frame kind %s", f.Kind)
	}
	return nil
}

// applyFirstPart applies a sqlitePages frame, or the first part of a
// continued one. changed reports whether anything was written.
func (s *Set) applyFirstPart(f *frames.Frame, overlap bool) (changed bool, err error) {
	p := &f.SQLite
	l := s.lanes[f.Lane]
	if l == nil {
		return false, corrupt("lane %d does not exist (a snapshot, newLane or initialize creates a lane)", f.Lane)
	}
	if l.kind != frames.LaneSQLitePages {
		return false, corrupt("sqlitePages frame for lane %d of kind %s", f.Lane, l.kind)
	}
	if l.t.Pages() > 0 && l.t.pageSize != p.PageSize {
		return false, corrupt("page size %d, lane %d has %d", p.PageSize, f.Lane, l.t.pageSize)
	}
	if !overlap && p.Before != l.t.sum {
		return false, checksumError("lane %d: checksum before is %s, the lane's is %s (the chain is broken)",
			f.Lane, p.Before, l.t.sum)
	}
	unwritten, err := s.checkGrowth(f, l, 0, 0)
	if err != nil {
		return false, err
	}
	if err := notLoaded(f, l); err != nil {
		return false, err
	}
	if l.t.Pages() == 0 {
		l.t.pageSize = p.PageSize // an empty lane takes the frame's page size
	}
	return true, s.writePart(f, l, 0, unwritten)
}

// applyNextPart applies a part after the first of a continued frame.
func (s *Set) applyNextPart(f *frames.Frame) error {
	q := s.part
	p, h := &f.SQLite, &q.SQLite
	if f.Kind != frames.KindSQLitePages || f.Epoch != q.Epoch || f.Lane != q.Lane ||
		f.FirstSeq != q.FirstSeq || f.LastSeq != q.LastSeq || f.CommitTime != q.CommitTime ||
		p.PageSize != h.PageSize || p.DatabasePages != h.DatabasePages || p.Before != h.Before || p.After != h.After {
		return corrupt("expected the next part of frame %d..%d (lane %d), got a different frame", q.FirstSeq, q.LastSeq, q.Lane)
	}
	l := s.lanes[f.Lane] // exists: parts keep the lane, and nothing else ran since the first
	unwritten, err := s.checkGrowth(f, l, q.lastPage, q.unwritten)
	if err != nil {
		return err
	}
	if err := notLoaded(f, l); err != nil {
		return err
	}
	return s.writePart(f, l, q.unwritten, unwritten)
}

// checkGrowth counts the zero pages the part f would add to lane l (pages
// skipped over by a write past the end, and growth by the last part), given
// the previous parts' last page and zero pages, and checks them against
// MaxUnwrittenPages per frame and the Set's budget. It returns the frame's
// total so far.
func (s *Set) checkGrowth(f *frames.Frame, l *laneFile, lastPage, unwritten uint32) (uint32, error) {
	p := &f.SQLite
	if len(p.Pages) > 0 && p.Pages[0].Number <= lastPage {
		return 0, corrupt("page %d after page %d of the previous part", p.Pages[0].Number, lastPage)
	}
	size := l.t.Pages()
	total := uint64(unwritten)
	for i := range p.Pages {
		n := p.Pages[i].Number
		if n > size {
			total += uint64(n - size - 1)
			size = n
		}
	}
	if !p.Continued && p.DatabasePages > size {
		total += uint64(p.DatabasePages - size)
	}
	if total > MaxUnwrittenPages {
		return 0, corrupt("lane %d: the frame adds %d pages without writing them (limit %d)", f.Lane, total, MaxUnwrittenPages)
	}
	added := total - uint64(unwritten)
	received := s.stats.PagesWritten + s.stats.PagesLoaded + uint64(len(p.Pages))
	if s.stats.UnwrittenPages+added > MaxUnwrittenPages+received {
		return 0, corrupt("lane %d: %d pages added without writing them, against %d pages received (limit %d more)",
			f.Lane, s.stats.UnwrittenPages+added, received, MaxUnwrittenPages)
	}
	return uint32(total), nil
}

// writePart writes a part's pages; on the last part it sets the lane's size
// and checks the checksum after. prev and unwritten are the frame's zero
// pages before and after this part (from checkGrowth).
func (s *Set) writePart(f *frames.Frame, l *laneFile, prev, unwritten uint32) error {
	p := &f.SQLite
	if err := l.writePages(p.Pages, s.runBuffer()); err != nil {
		return err
	}
	if p.Continued {
		if s.part == nil {
			s.part = &partial{Frame: *f}
			s.part.SQLite.Pages = nil
		}
		if n := len(p.Pages); n > 0 {
			s.part.lastPage = p.Pages[n-1].Number
		}
		s.part.unwritten = unwritten
	} else {
		s.part = nil
		if err := l.resize(p.DatabasePages); err != nil {
			return err
		}
	}
	s.stats.PagesWritten += uint64(len(p.Pages))
	s.stats.UnwrittenPages += uint64(unwritten - prev)
	if !p.Continued && l.t.sum != p.After {
		return checksumError("lane %d: checksum after is %s, the lane's is %s once applied",
			f.Lane, p.After, l.t.sum)
	}
	return nil
}
