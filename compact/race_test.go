//go:build race

package compact_test

// raceEnabled: the race detector instruments SQLite itself (go-sqlite3 is
// SQLite translated to Go), about five times slower: workloads shrink.
const raceEnabled = true
