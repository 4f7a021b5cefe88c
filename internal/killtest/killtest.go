// Package killtest owns the child process of a SIGKILL test: it starts the
// test binary again as a child that runs a workload and prints what it has
// acknowledged on stdout, a line at a time, hands the test each line, kills
// the child with SIGKILL at the moment the test picks, and hands the test
// the lines the child printed before the kill landed, so that the test can
// check that everything acknowledged survived. The child finds its work in
// the environment variables the test gives it, through Main.
//
// It checks nothing about what survived (the test does), and it must never
// be imported outside a _test.go file.
package killtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// silence is how long a child may print nothing before the test fails: a
// bound that catches a hung child; it measures nothing.
const silence = 60 * time.Second

// Main is the TestMain of a package whose tests start children: with the
// environment variable env set, this process is such a child, and it runs
// child with env's value and exits, with status 2 and the error on stderr
// if child fails; without it, it runs the tests.
func Main(m *testing.M, env string, child func(value string) error) {
	if v := os.Getenv(env); v != "" {
		if err := child(v); err != nil {
			fmt.Fprintln(os.Stderr, "kill child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Child is a running child process of the test binary.
type Child struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	lines  chan string
	stderr strings.Builder
	reaped bool
}

// Start runs the test binary again with no tests to run (-test.run=^$)
// and env (NAME=value) added to its environment, so that its Main runs the
// child. name begins the test's messages about the child ("kill 3"). A
// child the test leaves running, because it failed before Kill, is killed
// when the test ends.
func Start(t testing.TB, name string, env ...string) *Child {
	t.Helper()
	c := &Child{t: t, name: name, cmd: exec.Command(os.Args[0], "-test.run=^$"), lines: make(chan string, 4096)}
	c.cmd.Env = append(os.Environ(), env...)
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if !c.reaped {
			c.reap(nil)
		}
	})
	return c
}

// Kill hands see each line the child prints, in order, until the moment
// to kill it comes: when at fires (a nil at: no moment yet). see moves the
// moment by returning a channel, which then replaces at (nil: it stays).
// Then Kill sends the child SIGKILL, hands see each line it printed before
// the kill landed, with killed true (what see returns then does not
// matter), and waits for the child to end. It fails the test if the child
// exits before it is killed, or prints nothing for 60 s.
func (c *Child) Kill(at <-chan time.Time, see func(line string, killed bool) <-chan time.Time) {
	c.t.Helper()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				err := c.reap(nil)
				c.t.Fatalf("%s: child exited on its own (%v); stderr:\n%s", c.name, err, c.stderr.String())
			}
			if next := see(line, false); next != nil {
				at = next
			}
		case <-at:
			c.reap(func(line string) { see(line, true) })
			return
		case <-time.After(silence):
			c.reap(nil)
			c.t.Fatalf("%s: child silent for 60 s; stderr:\n%s", c.name, c.stderr.String())
		}
	}
}

// reap kills the child (SIGKILL), hands see (if any) the lines left on
// its stdout, and waits for it to end: the pipe is read to its end before
// Wait, which closes it.
func (c *Child) reap(see func(string)) error {
	c.cmd.Process.Kill()
	for line := range c.lines {
		if see != nil {
			see(line)
		}
	}
	c.reaped = true
	return c.cmd.Wait()
}

// Stderr returns what the child wrote to stderr. Call it only after
// Kill: until the child ends, it may still be writing.
func (c *Child) Stderr() string { return c.stderr.String() }
