package killtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

const envChild = "KILLTEST_CHILD"

func TestMain(m *testing.M) { Main(m, envChild, child) }

// child "count" prints 1, 2, 3, … until it is killed; "fail" writes to
// stderr and fails.
func child(mode string) error {
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "the child's last words")
		return errors.New("failed on purpose")
	}
	out := bufio.NewWriter(os.Stdout)
	for n := 1; ; n++ {
		fmt.Fprintln(out, n)
		out.Flush()
	}
}

// Kill hands over every line the child printed, in order, those before
// the moment with killed false and the rest (printed before SIGKILL
// landed) with killed true, and returns once the child is gone.
func TestKillHandsEveryLineInOrder(t *testing.T) {
	c := Start(t, "count", envChild+"=count")
	var before, after int
	c.Kill(nil, func(line string, killed bool) <-chan time.Time {
		n, err := strconv.Atoi(line)
		if err != nil || n != before+after+1 {
			t.Fatalf("line %q after %d lines", line, before+after)
		}
		if killed {
			after++
			return nil
		}
		before++
		if before == 100 {
			return time.After(0)
		}
		return nil
	})
	if before < 100 {
		t.Fatalf("%d lines before the kill, the moment was set at line 100", before)
	}
	if c.cmd.ProcessState == nil || c.cmd.ProcessState.ExitCode() != -1 {
		t.Fatalf("child ended %v, want killed by a signal", c.cmd.ProcessState)
	}
	t.Logf("%d lines before the kill, %d after", before, after)
}

// fatal is a testing.TB whose Fatalf records the message and ends the
// goroutine, as testing.T's does.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A child that exits before it is killed fails the test, which is shown
// what the child wrote to stderr.
func TestChildExitingOnItsOwnFails(t *testing.T) {
	f := &fatal{TB: t}
	c := Start(f, "the child", envChild+"=fail")
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Kill(nil, func(line string, killed bool) <-chan time.Time {
			t.Errorf("the failing child printed %q", line)
			return nil
		})
	}()
	<-done
	if f.msg == "" {
		t.Fatal("Kill returned although the child exited on its own")
	}
	if !strings.Contains(f.msg, "the child's last words") || !strings.Contains(f.msg, "failed on purpose") {
		t.Fatalf("the failure does not show the child's stderr:\n%s", f.msg)
	}
}
