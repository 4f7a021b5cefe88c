//go:build !race

package vfs

const capRace = false
