package lanes

import (
	"context"
	"errors"
	"io"

	"github.com/framectl/framectl/frames"
)

// ReplayBatch applies every frame message of a batch, in order, until br
// reports io.EOF (the batch verified completely). key names the batch in
// errors (frames.BatchReader does not expose the key it was given).
//
// Frames already covered are skipped, so replaying a batch the Set has,
// partly or wholly, is safe. A gap or a broken chain at the batch's first
// frame to apply leaves the Set unchanged. Any failure after a frame was
// applied (a later frame, damage found further on, a trailer that does not
// verify, ctx cancelled) leaves the Set holding frames that never verified:
// it becomes unusable (ErrBroken) and the caller discards it.
func (s *Set) ReplayBatch(ctx context.Context, br *frames.BatchReader, key string) error {
	if err := s.usable("replay"); err != nil {
		return withKey(err, key)
	}
	changed := false
	fail := func(err error) error {
		err = withKey(err, key)
		if changed {
			return s.fail(err)
		}
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		f, err := br.Next()
		if err == io.EOF {
			if err := s.idle("replay"); err != nil { // BatchReader refuses this; Apply's other callers may not
				return fail(err)
			}
			return nil
		}
		if err != nil {
			return fail(err)
		}
		c, err := s.apply(f)
		changed = changed || c
		if err != nil {
			return fail(err)
		}
	}
}

// withKey returns err as an *Error of the replay of batch key.
func withKey(err error, key string) error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Op, c.Key = "replay", key
		return &c
	}
	return &Error{Op: "replay", Key: key, Err: err}
}
