//go:build race

package vfs

// capRace: the race detector's instrumentation allocates, so exact
// allocation counts are not checked under it.
const capRace = true
