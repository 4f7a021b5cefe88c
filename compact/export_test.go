package compact

// Internals the external tests (package compact_test, which may import
// package vfs: vfs may import compact, so these tests cannot live inside
// the package) check against.
var (
	SnapshotHeader = snapshotHeader
	DBBytes        = dbBytes
)

const MaxAttempts = maxAttempts
