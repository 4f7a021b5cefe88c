package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// actorhostBin is the server the multi-process tests run: this package
// built once, without the race detector (the harness runs under it; eight
// race-instrumented servers on two cores would spend the tests' time on
// instrumentation). ACTORHOST_TEST_RACE=1 builds the servers with -race
// too, to look for races in the server under real multi-process load.
var actorhostBin string

const envServerRace = "ACTORHOST_TEST_RACE"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "actorhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	actorhostBin = filepath.Join(dir, "actorhost")
	args := []string{"build", "-o", actorhostBin}
	if os.Getenv(envServerRace) == "1" {
		args = append(args, "-race")
	}
	// go test puts its toolchain's bin directory first in PATH.
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building actorhost:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
