package host

import (
	"errors"
	"fmt"

	"github.com/framectl/framectl/internal/dirlock"
)

// lockFile is the lock of a data directory: the host's, and each actor's.
const lockFile = "host.lock"

// lockDir takes dir's lock (package dirlock) until unlock. Two processes
// on one directory would open the same database files under two nodes;
// the second one gets ErrLocked instead.
func lockDir(dir string) (unlock func(), err error) {
	unlock, err = dirlock.Lock(dir, lockFile)
	var le *dirlock.LockedError
	switch {
	case errors.As(err, &le):
		return nil, fmt.Errorf("%w: %s", ErrLocked, le.Path)
	case err != nil:
		return nil, fmt.Errorf("host: %w", err)
	}
	return unlock, nil
}
