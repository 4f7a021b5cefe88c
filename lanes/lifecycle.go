package lanes

import (
	"fmt"

	"github.com/framectl/framectl/frames"
)

// The frames that create, reset and delete lanes. In an overlapping frame
// (FirstSeq <= Seq < LastSeq) the Set may already hold part of the frame's
// effect, so there the rules ask only for the end state: newLane and
// initialize leave the lane existing and empty, deleteLane leaves it absent.

func (s *Set) applyNewLane(f *frames.Frame, overlap bool) (changed bool, err error) {
	if l := s.lanes[f.Lane]; l != nil {
		if !overlap {
			return false, corrupt("new lane %d already exists", f.Lane)
		}
		if l.kind != f.NewLane {
			return false, corrupt("new lane %d of kind %s, the lane has kind %s", f.Lane, f.NewLane, l.kind)
		}
		return true, l.resize(0)
	}
	return false, s.createLane(f.Lane, f.NewLane)
}

func (s *Set) applyInitialize(f *frames.Frame) (changed bool, err error) {
	if l := s.lanes[f.Lane]; l != nil {
		return true, l.resize(0)
	}
	return false, s.createLane(f.Lane, frames.LaneSQLitePages)
}

func (s *Set) applyDeleteLane(f *frames.Frame, overlap bool) (changed bool, err error) {
	l := s.lanes[f.Lane]
	if l == nil {
		if overlap {
			return false, nil
		}
		return false, corrupt("deleted lane %d does not exist", f.Lane)
	}
	delete(s.lanes, f.Lane)
	if err := l.remove(); err != nil {
		return true, fmt.Errorf("delete lane %d: %w", f.Lane, err)
	}
	return true, nil
}

// createLane adds an empty lane. A failure leaves the Set unchanged.
func (s *Set) createLane(num uint32, kind frames.LaneKind) error {
	if len(s.lanes) >= MaxLanes {
		return corrupt("lane %d would be lane number %d of the Set (limit %d)", num, len(s.lanes)+1, MaxLanes)
	}
	l, err := createLaneFile(s.dir, num, kind)
	if err != nil {
		return fmt.Errorf("create lane %d: %w", num, err)
	}
	s.lanes[num] = l
	return nil
}
