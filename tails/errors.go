package tails

import (
	"errors"
	"fmt"
)

// Errors callers decide on, for errors.Is. A file that fails its checks is
// a *FileError instead, matching one of frames.ErrCorrupt,
// frames.ErrTruncated, frames.ErrTooLarge and frames.ErrUnknownKind.
var (
	// ErrLocked: another Store, in this process or another, has the
	// directory open.
	ErrLocked = errors.New("tails: directory in use by another store")
	// ErrFull: a write would take the store past Config.MaxBytes, or the
	// disk refused it (ENOSPC, EDQUOT: the error wraps the system's too).
	// Nothing was changed: the actor's state is the one before.
	ErrFull = errors.New("tails: store full")
	// ErrInvalid: a caller broke a rule of the API: an actor name
	// follow.ValidActor refuses (empty, or longer than
	// follow.MaxActorBytes), or a State that follow.OpenFollower would
	// refuse or that takes back what the stored one promised (a lower
	// Promised or LogEpoch).
	ErrInvalid = errors.New("tails: invalid")
	// ErrFailed: a write to the actor's file failed and could not be
	// undone (the file could not be cut back to its last record, or a
	// directory fsync failed), so what the disk holds is not known. The
	// store refuses the actor until it is reopened (or the actor deleted);
	// the follower is to be replaced. The error wraps the cause.
	ErrFailed = errors.New("tails: actor's file in an unknown state after a failed write")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("tails: store closed")
)

// FileError is a file that fails its checks: which file, the byte offset
// of the field that failed, and why (matching one of frames.ErrCorrupt,
// frames.ErrTruncated, frames.ErrTooLarge and frames.ErrUnknownKind).
type FileError struct {
	Path   string
	Offset int64
	Err    error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("tails: %s: at byte %d: %v", e.Path, e.Offset, e.Err)
}
func (e *FileError) Unwrap() error { return e.Err }

// failedError is ErrFailed with its cause.
type failedError struct {
	actor string
	cause error
}

func (e *failedError) Error() string {
	return fmt.Sprintf("%v: actor %q: %v", ErrFailed, e.actor, e.cause)
}
func (e *failedError) Unwrap() []error { return []error{ErrFailed, e.cause} }
