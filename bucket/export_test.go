package bucket

// SetTestHook makes every directory bucket commit in this process call f
// at named points, with the key it is committing:
//
//	"locked"    the key's lock has just been taken
//	"renaming"  parents exist, the rename into place is next
//
// nil removes the hook. Set it only while no commit runs.
func SetTestHook(f func(point, key string)) { testHook = f }
