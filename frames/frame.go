package frames

import (
	"fmt"
	"math"
)

// Kind is what a frame does to its lane (the Frame union of frames.capnp).
type Kind uint8

const (
	KindSQLitePages Kind = iota + 1 // pages written to a SQLite database lane
	KindNewLane                     // the lane is created, empty
	KindInitialize                  // the lane is reset to empty
	KindDeleteLane                  // the lane no longer exists
)

func (k Kind) String() string {
	switch k {
	case KindSQLitePages:
		return "sqlitePages"
	case KindNewLane:
		return "newLane"
	case KindInitialize:
		return "initialize"
	case KindDeleteLane:
		return "deleteLane"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// LaneKind is what a lane holds.
type LaneKind uint8

// LaneSQLitePages is a SQLite database file, replicated page by page.
const LaneSQLitePages LaneKind = 1

func (k LaneKind) String() string {
	if k == LaneSQLitePages {
		return "sqlitePages"
	}
	return fmt.Sprintf("LaneKind(%d)", uint8(k))
}

// Page is one database page.
type Page struct {
	Number uint32 // 1-based
	Data   []byte // exactly the frame's page size
}

// SQLitePages is the body of a KindSQLitePages frame.
type SQLitePages struct {
	PageSize      uint32   // power of two, 512..65536
	DatabasePages uint32   // database size in pages after the frame
	Before, After Checksum // database checksum before and after
	Pages         []Page   // strictly ascending numbers, each <= DatabasePages
	// Continued is set by BatchReader.Next on every part of a frame split
	// over several messages but the last. Frames given to WriteBatch and
	// returned by ReadBatch are whole: Continued is false.
	Continued bool
}

// Frame is one change to one lane. See frames.capnp for the meaning of every
// field.
type Frame struct {
	Epoch      Epoch
	FirstSeq   Seq // >= 1
	LastSeq    Seq // >= FirstSeq
	Lane       uint32
	CommitTime int64 // Unix nanoseconds of the commit at LastSeq
	Kind       Kind
	SQLite     SQLitePages // when Kind == KindSQLitePages
	NewLane    LaneKind    // when Kind == KindNewLane
}

func (f *Frame) String() string {
	s := fmt.Sprintf("frame %d..%d epoch %d lane %d %s", f.FirstSeq, f.LastSeq, f.Epoch, f.Lane, f.Kind)
	switch f.Kind {
	case KindSQLitePages:
		s += fmt.Sprintf(" pageSize %d pages %d/%d checksum %s->%s", f.SQLite.PageSize,
			len(f.SQLite.Pages), f.SQLite.DatabasePages, f.SQLite.Before, f.SQLite.After)
		if f.SQLite.Continued {
			s += " (continued)"
		}
	case KindNewLane:
		s += " " + f.NewLane.String()
	}
	return s
}

// validate checks a frame on its own: the rules the writer obeys and the
// reader enforces. after is the page number the first page must exceed (0,
// or the last page of the previous part of a continued frame).
func (f *Frame) validate(after uint32) error {
	if f.FirstSeq == 0 {
		return corrupt("frame starts at sequence 0")
	}
	if f.LastSeq < f.FirstSeq {
		return corrupt(fmt.Sprintf("frame range %d..%d is backwards", f.FirstSeq, f.LastSeq))
	}
	switch f.Kind {
	case KindSQLitePages:
		p := &f.SQLite
		if !ValidPageSize(p.PageSize) {
			return corrupt(fmt.Sprintf("frame %d..%d: page size %d is not a power of two in 512..65536", f.FirstSeq, f.LastSeq, p.PageSize))
		}
		if p.DatabasePages > MaxDatabasePages {
			return corrupt(fmt.Sprintf("frame %d..%d: database size %d pages exceeds SQLite's maximum", f.FirstSeq, f.LastSeq, p.DatabasePages))
		}
		prev := after
		for i := range p.Pages {
			pg := &p.Pages[i]
			if pg.Number <= prev {
				return corrupt(fmt.Sprintf("frame %d..%d: page numbers not strictly ascending (%d after %d)", f.FirstSeq, f.LastSeq, pg.Number, prev))
			}
			if pg.Number > p.DatabasePages {
				return corrupt(fmt.Sprintf("frame %d..%d: page %d past the database size %d", f.FirstSeq, f.LastSeq, pg.Number, p.DatabasePages))
			}
			if len(pg.Data) != int(p.PageSize) {
				return corrupt(fmt.Sprintf("frame %d..%d: page %d has %d bytes, page size is %d", f.FirstSeq, f.LastSeq, pg.Number, len(pg.Data), p.PageSize))
			}
			prev = pg.Number
		}
	case KindNewLane:
		if f.NewLane != LaneSQLitePages {
			return unknownKind(fmt.Sprintf("frame %d..%d: new lane of unknown kind %d", f.FirstSeq, f.LastSeq, f.NewLane))
		}
	case KindInitialize, KindDeleteLane:
	default:
		return unknownKind(fmt.Sprintf("frame %d..%d: unknown frame kind %d", f.FirstSeq, f.LastSeq, f.Kind))
	}
	return nil
}

// follows checks that next may come right after prev in a batch: the next
// sequence number, or the next part of a continued frame.
func follows(prev, next *Frame) error {
	if prev.Kind == KindSQLitePages && prev.SQLite.Continued {
		p, n := &prev.SQLite, &next.SQLite
		if next.Kind != KindSQLitePages || next.Epoch != prev.Epoch || next.Lane != prev.Lane ||
			next.FirstSeq != prev.FirstSeq || next.LastSeq != prev.LastSeq || next.CommitTime != prev.CommitTime ||
			n.PageSize != p.PageSize || n.DatabasePages != p.DatabasePages || n.Before != p.Before || n.After != p.After {
			return corrupt(fmt.Sprintf("frame %d..%d: a continuation part differs from the part before it", prev.FirstSeq, prev.LastSeq))
		}
		return nil
	}
	if prev.LastSeq == math.MaxUint64 || next.FirstSeq != prev.LastSeq+1 {
		return corrupt(fmt.Sprintf("frame %d..%d does not follow frame %d..%d", next.FirstSeq, next.LastSeq, prev.FirstSeq, prev.LastSeq))
	}
	return nil
}
