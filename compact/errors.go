package compact

import (
	"errors"

	"github.com/framectl/framectl/frames"
)

// ErrRaced: objects the pass listed kept vanishing while it read them
// (another compactor, or a tier pass, deleting them) and it gave up after
// maxAttempts listings. Nothing was deleted by this pass; the other one is
// doing the work. It wraps the last bucket.ErrNotFound.
var ErrRaced = errors.New("compact: objects vanished while the pass read them (another compaction running?)")

// Error is a failed step of a pass, with the actor and the object it
// concerns: every error Actor returns is or wraps one, so a caller of
// Namespace tells whose pass failed with errors.As. Match the cause with
// errors.Is: bucket.ErrNotFound and the bucket's other sentinels,
// frames.ErrDamage for any damage, and to tell which: frames.ErrCorrupt and
// its kin for a damaged object, lanes.ErrGap and lanes.ErrChecksum for a
// log that does not replay, fence.ErrBadRecord for a damaged own.json.
type Error struct {
	Op    string       // "read own.json", "list", "read snapshot", "replay", "verify", "write snapshot", "upload", "delete", "collect"
	Actor frames.Actor // zero for a listing of a namespace
	Key   string       // the object (for list: the actor's or the namespace's prefix); "" for delete
	Err   error
}

func (e *Error) Error() string {
	msg := "compact: " + e.Op
	if e.Key == "" && e.Actor.Actor != "" {
		msg += " " + e.Actor.Prefix()
	}
	return msg + frames.KeyText(e.Key, e.Err) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// PrintsKey reports whether key is the object the error names, or, for
// an error with no object, the actor's prefix (frames.KeyPrinter).
func (e *Error) PrintsKey(key string) bool {
	return e.Key != "" && key == e.Key || e.Key == "" && e.Actor.Actor != "" && key == e.Actor.Prefix()
}
