package compact

// Internals the external tests (package compact_test, which may import
// package framectl: its session imports compact, so these tests cannot live
// inside the package) check against.
var (
	SnapshotHeader = snapshotHeader
	DBBytes        = dbBytes
)

const MaxAttempts = maxAttempts

// FullReplay returns o with the incremental build off: a manifest base is
// loaded whole, as before the build loaded chunks on first touch.
func FullReplay(o Options) Options {
	o.fullReplay = true
	return o
}
