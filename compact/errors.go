package compact

import (
	"errors"
	"strings"
)

// ErrRaced: objects the pass listed kept vanishing while it read them
// (another compactor, or a tier pass, deleting them) and it gave up after
// maxAttempts listings. Nothing was deleted by this pass; the other one is
// doing the work. It wraps the last bucket.ErrNotFound.
var ErrRaced = errors.New("compact: objects vanished while the pass read them (another compaction running?)")

// Error is a failed step of a pass, with the object it concerns. Match the
// cause with errors.Is: bucket.ErrNotFound and the bucket's other sentinels,
// frames.ErrCorrupt and its kin for a damaged object, lanes.ErrGap and
// lanes.ErrChecksum for a log that does not replay, fence.ErrBadRecord for a
// damaged own.json.
type Error struct {
	Op  string // "read own.json", "list", "read snapshot", "replay", "verify", "write snapshot", "upload", "delete"
	Key string // the object (for list: the actor's prefix)
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("compact: ")
	b.WriteString(e.Op)
	// Errors from bucket, frames and lanes usually name the key already.
	if e.Key != "" && !strings.Contains(e.Err.Error(), e.Key) {
		b.WriteString(" ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }
