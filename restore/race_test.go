//go:build race

package restore_test

func init() { raceEnabled = true }
