package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cluster runs actorhost processes against one bucket. Each slot is a
// data directory and an address; a slot's process can be killed and
// restarted (a new node at the same address, over the same directory).
type cluster struct {
	t     testing.TB
	b     bucket.Bucket
	flags []string
	root  string

	mu    sync.Mutex
	slots []*proc
	all   []*proc
	// restartLost: a node that exits 3 on its own (its lease lapsed: on
	// a loaded machine a renewal can start late) is restarted as a new
	// node, like a supervisor would, instead of failing the test. What it
	// acknowledged before is still checked like everything else.
	restartLost bool
	lost        int // such exits
}

// proc is one actorhost process.
type proc struct {
	slot    int
	addr    string
	id      string // node ID
	data    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	state   *os.ProcessState // once exited is closed

	mu       sync.Mutex
	down     bool // killed, stopped or draining: not a target for new requests
	expected bool // its exit is expected: not a test failure
	lost     bool // exited 3 on its own, to be restarted (restartLost)
	downAt   time.Time
	exitedAt time.Time
}

// startTimeout bounds how long a process may take to print its address.
const startTimeout = 60 * time.Second

func newCluster(t testing.TB, b bucket.Bucket, flags ...string) *cluster {
	c := &cluster{t: t, b: b, flags: flags, root: t.TempDir()}
	t.Cleanup(c.cleanup)
	return c
}

// startSupervisor makes the cluster restart nodes that lose their lease
// (see restartLost) until the test ends.
func (c *cluster) startSupervisor() {
	c.restartLost = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.supervise(ctx)
	}()
	// Registered after newCluster's cleanup, so it runs first.
	c.t.Cleanup(func() {
		cancel()
		<-done
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.lost > 0 {
			c.t.Logf("%d nodes lost their lease under load and were restarted", c.lost)
		}
	})
}

// start runs a process in slot (a new slot if slot == len(slots)), at the
// address of the slot's previous process if any (a new node at the same
// address), else on a free port.
func (c *cluster) start(slot int) *proc {
	c.t.Helper()
	p, err := c.startProc(slot)
	require.NoError(c.t, err)
	return p
}

func (c *cluster) startProc(slot int) (*proc, error) {
	c.mu.Lock()
	addr := "127.0.0.1:0"
	if slot < len(c.slots) && c.slots[slot] != nil {
		addr = c.slots[slot].addr
	}
	for len(c.slots) <= slot {
		c.slots = append(c.slots, nil)
	}
	n := len(c.all)
	c.mu.Unlock()
	p := &proc{
		slot:    slot,
		data:    filepath.Join(c.root, fmt.Sprintf("node%d", slot)),
		logPath: filepath.Join(c.root, fmt.Sprintf("node%d-%d.log", slot, n)),
		exited:  make(chan struct{}),
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"-listen", addr, "-bucket", c.b.String(), "-data", p.data}, c.flags...)
	p.cmd = exec.Command(actorhostBin, args...)
	p.cmd.Stderr = logf
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		p.cmd.Wait()
		logf.Close()
		p.state = p.cmd.ProcessState
		p.mu.Lock()
		expected := p.expected
		p.exitedAt = time.Now()
		if !p.down {
			p.down, p.downAt = true, p.exitedAt
		}
		lost := !expected && c.restartLost && p.state.ExitCode() == exitFenced
		p.lost = lost
		p.mu.Unlock()
		// Before exited is closed: cleanup waits for it, so this never
		// runs after the test ended.
		switch {
		case lost:
			c.t.Logf("node%d lost its lease and exited 3; it will restart as a new node. Its log ends:\n%s", p.slot, p.logTail(8))
		case !expected:
			c.t.Errorf("node%d (%s) exited unexpectedly: %v\n%s", p.slot, p.logPath, p.state, p.logTail(30))
		}
		close(p.exited)
	}()
	select {
	case line := <-lines:
		// "listening ADDR node ID"
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "listening" || f[2] != "node" {
			p.kill()
			return nil, fmt.Errorf("node%d printed %q", slot, line)
		}
		p.addr, p.id = f[1], f[3]
	case <-p.exited:
		return nil, fmt.Errorf("node%d exited at start: %v\n%s", slot, p.state, p.logTail(30))
	case <-time.After(startTimeout):
		p.kill()
		return nil, fmt.Errorf("node%d did not start within %v\n%s", slot, startTimeout, p.logTail(30))
	}
	c.mu.Lock()
	c.slots[slot] = p
	c.all = append(c.all, p)
	c.mu.Unlock()
	return p, nil
}

// supervise restarts the nodes that lost their lease (restartLost), until
// ctx ends.
func (c *cluster) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		c.mu.Lock()
		var lost []int
		for slot, p := range c.slots {
			if p != nil && p.isLost() {
				p.mu.Lock()
				p.lost = false // restarting it now
				p.mu.Unlock()
				c.lost++
				lost = append(lost, slot)
			}
		}
		c.mu.Unlock()
		for _, slot := range lost {
			if ctx.Err() != nil {
				return
			}
			_, err := c.startProc(slot)
			assert.NoError(c.t, err, "restarting node%d", slot)
		}
	}
}

// startN starts n processes in new slots.
func (c *cluster) startN(n int) []*proc {
	c.t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		c.mu.Lock()
		slot := len(c.slots)
		c.mu.Unlock()
		ps[i] = c.start(slot)
	}
	return ps
}

// live returns the processes that are up and not known to be going down.
func (c *cluster) live() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*proc
	for _, p := range c.slots {
		if p != nil && !p.isDown() {
			out = append(out, p)
		}
	}
	return out
}

// pick returns a random live process (nil if none).
func (c *cluster) pick() *proc {
	l := c.live()
	if len(l) == 0 {
		return nil
	}
	return l[rand.IntN(len(l))]
}

// byID returns the process that ran node id.
func (c *cluster) byID(id string) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.all {
		if p.id == id {
			return p
		}
	}
	return nil
}

// nodeName names a node ID for messages: its slot and ID prefix.
func (c *cluster) nodeName(id string) string {
	if p := c.byID(id); p != nil {
		return fmt.Sprintf("node%d(%.8s)", p.slot, id)
	}
	return fmt.Sprintf("?(%.8s)", id)
}

func (c *cluster) cleanup() {
	c.mu.Lock()
	all := append([]*proc(nil), c.all...)
	c.mu.Unlock()
	for _, p := range all {
		p.kill()
	}
	for _, p := range all {
		<-p.exited
	}
	if c.t.Failed() {
		for _, p := range all {
			c.t.Logf("log of node%d %s (%s):\n%s", p.slot, p.id, p.addr, p.logTail(40))
		}
	}
}

func (p *proc) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

// goingDownGrace: a node that stops serving (its lease lapsed) closes its
// listener and connections, then exits: a connection error it caused up to
// this long before it exited is part of going down.
const goingDownGrace = 5 * time.Second

// excuses reports whether a connection error at t is explained by p going
// down: it was told to (killed, paused, SIGTERM) before t, or it exited on
// its own within goingDownGrace after t.
func (p *proc) excuses(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down && (!p.downAt.After(t) || p.exitedAt.Sub(t) < goingDownGrace)
}

func (p *proc) isLost() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

func (p *proc) setDown(down, expectExit bool) {
	p.mu.Lock()
	if down && !p.down {
		p.downAt = time.Now()
	}
	p.down = down
	p.expected = p.expected || expectExit
	p.mu.Unlock()
}

// kill sends SIGKILL (after SIGCONT, harmless if not stopped).
func (p *proc) kill() {
	p.setDown(true, true)
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
}

// terminate sends SIGTERM: the node drains and exits.
func (p *proc) terminate() {
	p.setDown(true, true)
	p.cmd.Process.Signal(syscall.SIGTERM)
}

// stop pauses the process (SIGSTOP) and returns once it is stopped; cont
// resumes it. A resumed node whose lease ran out exits: that is expected.
func (p *proc) stop() {
	p.setDown(true, true)
	p.cmd.Process.Signal(syscall.SIGSTOP)
	// The signal takes effect asynchronously, on a loaded machine many
	// milliseconds later; until then the process still serves.
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		data, err := os.ReadFile(stat)
		if err != nil {
			time.Sleep(200 * time.Millisecond) // no /proc: wait and hope
			return
		}
		// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
		if i := strings.LastIndexByte(string(data), ')'); i >= 0 && i+2 < len(data) && data[i+2] == 'T' {
			return
		}
	}
}

func (p *proc) cont() { p.cmd.Process.Signal(syscall.SIGCONT) }

// wait waits for the process to exit and returns its exit code (-1 if
// killed by a signal); ok false if it is still running after d.
func (p *proc) wait(d time.Duration) (code int, ok bool) {
	select {
	case <-p.exited:
		return p.state.ExitCode(), true
	case <-time.After(d):
		return 0, false
	}
}

func (p *proc) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every 20 ms until it holds; false after d (a guard
// against hanging, not a performance threshold).
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
