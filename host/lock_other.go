//go:build !unix

package host

// lockFile is the lock of a data directory (unused on this platform).
const lockFile = "host.lock"

// lockDir does not lock on this platform: run one process per directory.
func lockDir(dir string) (unlock func(), err error) { return func() {}, nil }
