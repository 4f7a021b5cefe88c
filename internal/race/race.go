//go:build race

package race

// Enabled: the binary is built with -race.
const Enabled = true
