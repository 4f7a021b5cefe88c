package framectl

import (
	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/internal/captured"
)

// local is the SQLite side of a session's file (session.Local): package
// capture's, each refusal of the session's given the reason Refusal reads
// back.
type local struct{ capture.Local }

func (l local) Attach(path string, a captured.Attachment) (func(), error) {
	a.Sink = sink{a.Sink}
	return l.Local.Attach(path, a)
}

// sink is the session's end of the capture, its refusals given their
// reasons.
type sink struct{ captured.Sink }

func (s sink) Writable() error { return refuse(s.Sink.Writable()) }
func (s sink) PhaseTwo() error { return refuse(s.Sink.PhaseTwo()) }
