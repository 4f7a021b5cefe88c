package framectl

import (
	"context"

	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/session"
)

// local is the SQLite side of a session's file (session.Local): package
// capture prepares it, reads its page size and captures its commits, each
// refusal carrying the reason Refusal reads back.
type local struct{}

func (local) Prepare(ctx context.Context, path string, pageSize int) error {
	return capture.Prepare(ctx, path, pageSize)
}

func (local) PageSize(path string) (uint32, error) { return capture.PageSize(path) }

func (local) Attach(path string, a session.Attachment) (func(), error) {
	return capture.Attach(path, capture.Options{Sink: sink{a.Capture}, Pages: a.Pages, PageSize: a.PageSize})
}

// sink is the session's Capture, its refusals given their reasons.
type sink struct{ session.Capture }

func (s sink) Writable() error { return refuse(s.Capture.Writable()) }
func (s sink) PhaseTwo() error { return refuse(s.Capture.PhaseTwo()) }
