// Package dirlock owns the lock that keeps a second process off a data
// directory: host's directories and a follower's store (package tails) take
// it before they touch anything in them. It never reads or writes the
// directory's other files.
package dirlock

import (
	"errors"
	"fmt"
)

// ErrLocked: another process, or another open in this one, holds the lock.
var ErrLocked = errors.New("directory locked by another process")

// LockedError is ErrLocked with the lock file that is held.
type LockedError struct {
	Path string
}

func (e *LockedError) Error() string        { return fmt.Sprintf("%v: %s", ErrLocked, e.Path) }
func (e *LockedError) Is(target error) bool { return target == ErrLocked }
