//go:build !unix

package dirlock

// Lock does not lock on this platform: run one process per directory.
func Lock(dir, name string) (unlock func(), err error) { return func() {}, nil }
