package restore

import (
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/frames"
)

// describe is the message of a problem with the object at key, found as
// err.
//
// A header that disagrees with its key (frames.KeyMismatchError) is found
// before the reader reaches the gzip trailer and the seal, so the error
// alone cannot say whether the stored bytes were altered (a flipped bit
// turned the header into another one that decodes) or a whole object was
// put under a key it does not belong to. The object is read again to its
// end without the key check to tell which.
func (v *verifier) describe(ctx context.Context, key string, err error) string {
	msg := cause(err)
	var mm *frames.KeyMismatchError
	if !errors.As(err, &mm) {
		return msg
	}
	rerr := v.readWithoutKey(ctx, key, mm.Key.Kind)
	switch _, sev := classify(rerr); {
	case rerr == nil:
		return "stored under a wrong key: the object reads whole (gzip trailer and seal verify), but its header says " +
			headerAndKey(mm)
	case sev == 0:
		return msg // vanished or unreadable since: the first answer stands
	}
	detail := rerr.Error()
	var fe *frames.Error
	if errors.As(rerr, &fe) {
		detail = fe.Err.Error()
	}
	return "corrupt header: it says " + headerAndKey(mm) + "; the rest of the object confirms the damage: " + detail
}

// headerAndKey says how a header and its key disagree.
func headerAndKey(mm *frames.KeyMismatchError) string {
	if mm.Key.Kind == frames.KeySnapshot {
		return fmt.Sprintf("epoch %d, seq %d, the key says epoch %d, seq %d", mm.Epoch, mm.LastSeq, mm.Key.Epoch, mm.Key.Seq)
	}
	return fmt.Sprintf("epoch %d, seq %d..%d, the key says epoch %d, last seq %d",
		mm.Epoch, mm.FirstSeq, mm.LastSeq, mm.Key.Epoch, mm.Key.Seq)
}

// readWithoutKey reads the object at key to its verified end without
// comparing its header with the key.
func (v *verifier) readWithoutKey(ctx context.Context, key string, kind frames.KeyKind) error {
	rc, _, err := v.b.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	if kind == frames.KeySnapshot {
		_, _, err = decodeSnapshot(rc, "", v.opts.Limits)
	} else {
		_, err = decodeBatch(rc, "", v.opts.Limits)
	}
	return err
}
