//go:build !race

// Package race says whether the binary runs under the race detector, for
// tests that cut their rounds under it: the detector instruments SQLite
// itself (go-sqlite3 is SQLite translated to Go, about five times slower
// under it) and allocates, so exact allocation counts do not hold. A test
// thinned under -race must also run in full without it (test.sh).
package race

// Enabled: the binary is built with -race.
const Enabled = false
