//go:build race

package follow

// raceEnabled: the race detector slows the simulation about tenfold, so it
// runs a fifth of its seeds under it (FOLLOW_SIM_SEEDS overrides).
const raceEnabled = true
