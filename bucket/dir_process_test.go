package bucket_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/require"
)

// The two-process tests re-run this test binary as a helper: with
// helperEnv set, TestMain runs helperMain instead of the tests.
const (
	helperEnv        = "FRAMECTL_BUCKET_HELPER" // "race" or "cas"
	helperRootEnv    = "FRAMECTL_BUCKET_HELPER_ROOT"
	helperIDEnv      = "FRAMECTL_BUCKET_HELPER_ID"
	helperRoundsEnv  = "FRAMECTL_BUCKET_HELPER_ROUNDS"
	helperWorkersEnv = "FRAMECTL_BUCKET_HELPER_WORKERS"
)

// helperModes are helper modes defined elsewhere (platform-specific tests),
// each its own main.
var helperModes = map[string]func() int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if f, ok := helperModes[mode]; ok {
			os.Exit(f())
		}
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// helperMain opens the directory bucket, says "ready", waits for a line on
// stdin so both helpers start together, runs its workers and prints one
// line per outcome:
//
//	race: "win ROUND" for each create-only put it won
//	cas:  "inc" for each increment it made
func helperMain(mode string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	id := os.Getenv(helperIDEnv)
	rounds, err1 := strconv.Atoi(os.Getenv(helperRoundsEnv))
	workers, err2 := strconv.Atoi(os.Getenv(helperWorkersEnv))
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	b, err := bucket.NewDir(os.Getenv(helperRootEnv))
	if err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fail(err)
	}

	var (
		mu       sync.Mutex
		out      = bufio.NewWriter(os.Stdout)
		firstErr error
		wg       sync.WaitGroup
	)
	report := func(line string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if line != "" {
			fmt.Fprintln(out, line)
		}
	}
	ctx := context.Background()
	for w := range workers {
		wg.Go(func() {
			switch mode {
			case "race":
				for r := range rounds {
					body := fmt.Sprintf("process %s worker %d", id, w)
					_, err := b.Put(ctx, fmt.Sprintf("race/%d", r), strings.NewReader(body), int64(len(body)), bucket.Condition{IfAbsent: true})
					switch {
					case err == nil:
						report(fmt.Sprintf("win %d %s", r, body), nil)
					case !errors.Is(err, bucket.ErrPrecondition):
						report("", err)
						return
					}
				}
			case "cas":
				for range rounds {
					for {
						rc, info, err := b.Get(ctx, "counter")
						if err != nil {
							report("", err)
							return
						}
						data, err := io.ReadAll(rc)
						rc.Close()
						n, perr := strconv.Atoi(string(data))
						if err = errors.Join(err, perr); err != nil {
							report("", err)
							return
						}
						next := strconv.Itoa(n + 1)
						_, err = b.Put(ctx, "counter", strings.NewReader(next), int64(len(next)), bucket.Condition{IfMatch: info.ETag})
						if err == nil {
							report("inc", nil)
							break
						}
						if !errors.Is(err, bucket.ErrPrecondition) {
							report("", err)
							return
						}
					}
				}
			default:
				report("", fmt.Errorf("unknown mode %q", mode))
			}
		})
	}
	wg.Wait()
	if err := out.Flush(); err != nil {
		return fail(err)
	}
	if firstErr != nil {
		return fail(firstErr)
	}
	return 0
}

// runHelpers starts n helper processes on root, releases them together and
// returns each one's output lines.
func runHelpers(t *testing.T, n int, mode, root string, rounds, workers int) [][]string {
	t.Helper()
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Scanner
		stderr bytes.Buffer
	}
	procs := make([]*proc, n)
	for i := range procs {
		p := &proc{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(),
			helperEnv+"="+mode, helperRootEnv+"="+root, helperIDEnv+"="+strconv.Itoa(i),
			helperRoundsEnv+"="+strconv.Itoa(rounds), helperWorkersEnv+"="+strconv.Itoa(workers))
		p.cmd.Stderr = &p.stderr
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := p.cmd.StdoutPipe()
		require.NoError(t, err)
		p.stdout = bufio.NewScanner(stdout)
		require.NoError(t, p.cmd.Start())
		procs[i] = p
	}
	for i, p := range procs {
		if !p.stdout.Scan() || p.stdout.Text() != "ready" {
			p.cmd.Wait()
			t.Fatalf("helper %d did not get ready: %q %s", i, p.stdout.Text(), p.stderr.String())
		}
	}
	for _, p := range procs {
		io.WriteString(p.stdin, "go\n")
		p.stdin.Close()
	}
	outs := make([][]string, n)
	for i, p := range procs {
		for p.stdout.Scan() {
			outs[i] = append(outs[i], p.stdout.Text())
		}
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, p.stderr.String())
		}
	}
	return outs
}

// TestDirTwoProcessesCreateOnly races create-only puts of one key per round
// from two processes with several goroutines each: exactly one put wins
// each round, and the object holds the winner's body.
func TestDirTwoProcessesCreateOnly(t *testing.T) {
	const rounds, workers = 150, 3
	root := t.TempDir()
	b, err := bucket.NewDir(root)
	require.NoError(t, err)
	outs := runHelpers(t, 2, "race", root, rounds, workers)
	winners := make([][]string, rounds)
	perProcess := make([]int, len(outs))
	for i, lines := range outs {
		for _, line := range lines {
			var r int
			var body string
			if _, err := fmt.Sscanf(line, "win %d", &r); err != nil || r < 0 || r >= rounds {
				t.Fatalf("helper %d: bad line %q", i, line)
			}
			body = strings.SplitN(line, " ", 3)[2]
			winners[r] = append(winners[r], body)
			perProcess[i]++
		}
	}
	for r := range rounds {
		if len(winners[r]) != 1 {
			t.Fatalf("round %d: %d winners %q", r, len(winners[r]), winners[r])
		}
		got, _ := mustGet(t, b, fmt.Sprintf("race/%d", r))
		if got != winners[r][0] {
			t.Fatalf("round %d: stored %q, winner %q", r, got, winners[r][0])
		}
	}
	t.Logf("rounds won per process: %v", perProcess)
}

// TestDirTwoProcessesCAS increments one counter with compare-and-swap from
// two processes with several goroutines each: no increment is lost.
func TestDirTwoProcessesCAS(t *testing.T) {
	const incs, workers, procs = 40, 2, 2
	root := t.TempDir()
	b, err := bucket.NewDir(root)
	require.NoError(t, err)
	put(t, b, "counter", "0")
	outs := runHelpers(t, procs, "cas", root, incs, workers)
	for i, lines := range outs {
		if len(lines) != incs*workers {
			t.Fatalf("helper %d reported %d increments, want %d", i, len(lines), incs*workers)
		}
	}
	got, _ := mustGet(t, b, "counter")
	if want := strconv.Itoa(procs * workers * incs); got != want {
		t.Fatalf("counter %s, want %s: updates were lost", got, want)
	}
}
