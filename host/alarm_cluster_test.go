package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// Alarms across processes: three alarm children (the test binary, see
// runAlarmChild) on one bucket, each a host on 127.0.0.1 whose namespace
// "ns" runs the tests' alarm handler. The handler prints a line when a
// run starts and when it ends; the parent reads them from every child.

// Alarm children's timings: lease + grace 3 s (longer than the other
// children's, so that a loaded machine does not end a node and run an
// alarm twice for that reason), scans every 200 ms.
const (
	alarmLease = 2 * time.Second
	alarmGrace = time.Second
	alarmScan  = 200 * time.Millisecond
)

const (
	envAlarmChild   = "FRAMECTL_HOST_TEST_ALARM_CHILD"   // the child's name
	envAlarmHang    = "FRAMECTL_HOST_TEST_ALARM_HANG"    // "1": the handler never returns for hang- actors
	envAlarmTimings = "FRAMECTL_HOST_TEST_ALARM_TIMINGS" // "LEASE GRACE SCAN" (durations), for the benchmark
)

// The test handler's behaviour, by actor ID: "fail2-…" fails its first
// two runs (Retry 0 and 1); "hang-…" never returns on a child started with
// envAlarmHang=1; anything else writes a note and succeeds.
const (
	prefixFail2 = "fail2-"
	prefixHang  = "hang-"
)

var errOnPurpose = errors.New("failing on purpose")

// runAlarmChild serves the notes app and /alarm/{ns}/{id} (PUT: body is
// the due time in Unix milliseconds; GET: "due gen" or 404; DELETE), and
// prints: "ready ADDR NODE", then "run ACTOR DUE GEN RETRY NODE EPOCH MS"
// and "end ACTOR GEN RETRY ok|fail MS" around each run of the handler, and
// "lost NODE" when its node is lost.
func runAlarmChild(name string) error {
	ctx := context.Background()
	b, ln, err := childBucket(ctx)
	if err != nil {
		return err
	}
	var out sync.Mutex
	printf := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	hang := os.Getenv(envAlarmHang) == "1"
	lease, grace, scan := alarmLease, alarmGrace, alarmScan
	if f := strings.Fields(os.Getenv(envAlarmTimings)); len(f) == 3 {
		var errs [3]error
		lease, errs[0] = time.ParseDuration(f[0])
		grace, errs[1] = time.ParseDuration(f[1])
		scan, errs[2] = time.ParseDuration(f[2])
		if err := errors.Join(errs[:]...); err != nil {
			return fmt.Errorf("%s: %w", envAlarmTimings, err)
		}
	}
	var h *Host
	handler := func(ctx context.Context, a *Actor, run alarm.Run) error {
		id := string(a.ID())
		printf("run %s %d %d %d %s %d %d", id, run.Due.UnixMilli(), run.Gen, run.Retry, h.Node().ID(), a.Epoch(), time.Now().UnixMilli())
		var err error
		switch {
		case strings.HasPrefix(id, prefixHang) && hang:
			<-ctx.Done()
			err = ctx.Err()
		case strings.HasPrefix(id, prefixFail2) && run.Retry < 2:
			err = errOnPurpose
		default:
			if err = addNote(ctx, a, fmt.Sprintf("alarm gen %d", run.Gen)); err == nil {
				err = a.DB().Durable(ctx)
			}
		}
		outcome := "ok"
		if err != nil {
			outcome = "fail"
		}
		printf("end %s %d %d %s %d", id, run.Gen, run.Retry, outcome, time.Now().UnixMilli())
		return err
	}
	h, err = New(ctx, Config{
		Bucket: b, Address: ln.Addr().String(), Dir: os.Getenv(envChildDir),
		Lease: lease, Grace: grace, Idle: -1, SweepAge: -1,
		Hooks:          (&notesHooks{}).hooks(),
		Alarms:         map[string]AlarmFunc{"ns": handler},
		AlarmScanEvery: scan,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/actor/{ns}/{id}", notesHandler(h, nil, HandlerOptions{}))
	mux.Handle("/alarm/{ns}/{id}", alarmRoutes(h))
	go http.Serve(ln, mux)
	go func() {
		for {
			n := h.Node()
			<-n.Done()
			printf("lost %s", n.ID())
			for h.Node() == n {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	printf("ready %s %s", h.Address(), h.Node().ID())
	select {} // until killed
}

// alarmRoutes serves /alarm/{ns}/{id} on the actor's holder.
func alarmRoutes(h *Host) http.Handler {
	return h.Handler(HandlerOptions{
		Route: routeByPath,
		Serve: func(w http.ResponseWriter, r *http.Request, a *Handle) {
			ctx := r.Context()
			var (
				out string
				err error
			)
			switch r.Method {
			case http.MethodPut:
				body, _ := io.ReadAll(r.Body)
				ms, perr := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
				if perr != nil {
					http.Error(w, perr.Error(), http.StatusBadRequest)
					return
				}
				var set alarm.Alarm
				if set, err = a.SetAlarm(ctx, pool(a), time.UnixMilli(ms)); err == nil {
					out = fmt.Sprintf("%d %d", set.Due.UnixMilli(), set.Gen)
				}
			case http.MethodDelete:
				err = a.DeleteAlarm(ctx, pool(a))
			default:
				al, ok, aerr := a.Alarm(ctx, pool(a))
				if aerr == nil && !ok {
					http.Error(w, "no alarm", http.StatusNotFound)
					return
				}
				out, err = fmt.Sprintf("%d %d", al.Due.UnixMilli(), al.Gen), aerr
			}
			if gateReply(w, r, h, a, err) {
				io.WriteString(w, out)
			}
		},
	})
}

// alarmEvent is one line an alarm child printed.
type alarmEvent struct {
	child string // the child's name
	kind  string // run, end, lost
	actor string
	due   int64 // run: Unix ms
	gen   uint64
	retry int
	node  string       // run: the node; lost: the node lost
	epoch frames.Epoch // run
	ok    bool         // end
	at    time.Time
}

func (e alarmEvent) String() string {
	return fmt.Sprintf("%s %s %s due=%d gen=%d retry=%d node=%.8s epoch=%d ok=%t at=%s",
		e.child, e.kind, e.actor, e.due, e.gen, e.retry, e.node, e.epoch, e.ok, e.at.Format("15:04:05.000"))
}

// parseAlarmEvent parses a child's line (see runAlarmChild).
func parseAlarmEvent(child, line string) (alarmEvent, error) {
	f := strings.Fields(line)
	e := alarmEvent{child: child}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("child %s printed %q", child, line))
		}
		return n
	}
	switch {
	case len(f) == 8 && f[0] == "run":
		e.kind, e.actor, e.due, e.gen, e.retry, e.node, e.epoch = f[0], f[1], num(f[2]), uint64(num(f[3])), int(num(f[4])), f[5], frames.Epoch(num(f[6]))
		e.at = time.UnixMilli(num(f[7]))
	case len(f) == 6 && f[0] == "end":
		e.kind, e.actor, e.gen, e.retry, e.ok = f[0], f[1], uint64(num(f[2])), int(num(f[3])), f[4] == "ok"
		e.at = time.UnixMilli(num(f[5]))
	case len(f) == 2 && f[0] == "lost":
		e.kind, e.node, e.at = f[0], f[1], time.Now()
	default:
		return e, fmt.Errorf("child %s printed %q", child, line)
	}
	return e, nil
}

// alarmCluster is the alarm children of one test and what they printed.
type alarmCluster struct {
	t        testing.TB
	b        bucket.Bucket
	mu       sync.Mutex
	events   []alarmEvent
	children map[string]*alarmChild
}

type alarmChild struct {
	name, addr, node string
	cmd              *exec.Cmd
	stderr           *syncBuffer
	exited           chan struct{}
}

func newAlarmCluster(t testing.TB, b bucket.Bucket) *alarmCluster {
	c := &alarmCluster{t: t, b: b, children: map[string]*alarmChild{}}
	t.Cleanup(func() {
		for _, ch := range c.children {
			ch.kill()
		}
		if t.Failed() {
			t.Logf("events:\n%s", c.dump())
			for name, ch := range c.children {
				t.Logf("log of child %s (node %s):\n%s", name, ch.node, tail(ch.stderr.String(), 60))
			}
		}
	})
	return c
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// start runs an alarm child named name; env adds to its environment.
func (c *alarmCluster) start(name string, env ...string) *alarmChild {
	t := c.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAlarmChild+"="+name, envChildBucket+"="+c.b.String(), envChildDir+"="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	ch := &alarmChild{name: name, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = ch.stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c.mu.Lock()
	c.children[name] = ch
	c.mu.Unlock()
	ready := make(chan string, 1)
	go func() {
		defer close(ch.exited)
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				ready <- sc.Text()
				first = false
				continue
			}
			e, err := parseAlarmEvent(name, sc.Text())
			c.mu.Lock()
			if err != nil {
				c.t.Errorf("%v", err)
			} else {
				c.events = append(c.events, e)
			}
			c.mu.Unlock()
		}
		close(ready)
	}()
	select {
	case line := <-ready:
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "ready" {
			t.Fatalf("child %s printed %q\n%s", name, line, ch.stderr.String())
		}
		ch.addr, ch.node = f[1], f[2]
	case <-time.After(hangGuard):
		t.Fatalf("child %s did not start\n%s", name, ch.stderr.String())
	}
	return ch
}

// kill sends SIGKILL and waits until the child's output is read.
func (ch *alarmChild) kill() {
	if ch.cmd.ProcessState != nil {
		return
	}
	ch.cmd.Process.Kill()
	<-ch.exited
	ch.cmd.Wait()
}

// all returns the events so far, of actor (lost events of every child
// too), in the order read.
func (c *alarmCluster) all(actor string) []alarmEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []alarmEvent
	for _, e := range c.events {
		if e.actor == actor || e.kind == "lost" {
			out = append(out, e)
		}
	}
	return out
}

func (c *alarmCluster) kind(actor, kind string) []alarmEvent {
	var out []alarmEvent
	for _, e := range c.all(actor) {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (c *alarmCluster) dump() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sb strings.Builder
	for _, e := range c.events {
		sb.WriteString(e.String() + "\n")
	}
	return sb.String()
}

// lost names the nodes that were lost (a loaded machine can end one, and
// an alarm then runs again): every failure message carries it.
func (c *alarmCluster) lost() string {
	var nodes []string
	for _, e := range c.kind("", "lost") {
		nodes = append(nodes, e.child+":"+e.node)
	}
	if nodes == nil {
		return "no node lost its lease"
	}
	return "nodes lost under load: " + strings.Join(nodes, ", ")
}

// waitOK waits until a run of actor's alarm ended ok.
func (c *alarmCluster) waitOK(actor string) alarmEvent {
	c.t.Helper()
	var ok []alarmEvent
	if !waitFor(func() bool {
		for _, e := range c.kind(actor, "end") {
			if e.ok {
				ok = append(ok, e)
				return true
			}
		}
		return false
	}) {
		c.t.Fatalf("no run of %s's alarm ended ok; %s\n%s", actor, c.lost(), c.dump())
	}
	return ok[0]
}

// alarmReq sends an alarm request to a child and returns status and body.
func alarmReq(t testing.TB, ch *alarmChild, method, actor, body string) (int, string, string) {
	t.Helper()
	for {
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+ch.addr+"/alarm/ns/"+actor, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			time.Sleep(100 * time.Millisecond) // Retry-After: a claim waiting for a lease
			continue
		}
		return resp.StatusCode, strings.TrimSpace(string(data)), resp.Header.Get(hdrNode)
	}
}

// setAlarm sets actor's alarm through ch and returns the node that holds
// it.
func setAlarm(t testing.TB, ch *alarmChild, actor string, due time.Time) string {
	t.Helper()
	status, body, node := alarmReq(t, ch, http.MethodPut, actor, strconv.FormatInt(due.UnixMilli(), 10))
	require.Equal(t, http.StatusOK, status, "setting %s's alarm through %s: %s", actor, ch.name, body)
	return node
}

// waitCleared waits until the actor has no alarm (asked through ch) and
// the namespace's index is empty.
func (c *alarmCluster) waitCleared(ch *alarmChild, actor string) {
	c.t.Helper()
	var status int
	var body string
	if !waitFor(func() bool {
		status, body, _ = alarmReq(c.t, ch, http.MethodGet, actor, "")
		return status == http.StatusNotFound
	}) {
		c.t.Fatalf("%s's alarm is still set: %d %s; %s", actor, status, body, c.lost())
	}
	waitIndex(c.t, c.b, "ns")
}

// settleTime is how long a test watches for runs that must not happen:
// many scans and looks of every child.
const settleTime = 10 * alarmScan

// Moved several times, through three nodes (two of them forward to the
// holder), before it is due: the alarm runs once, at the latest time, on
// the holder, and is then cleared, its entry deleted.
func TestAlarmMovedRunsOnceAtTheLatestTime(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			c := newAlarmCluster(t, be.New(t))
			a, b, cc := c.start("A"), c.start("B"), c.start("C")
			start := time.Now()
			holder := setAlarm(t, a, "moved", start.Add(3*time.Second))
			require.Equal(t, a.node, holder, "the first set claims the actor on A")
			assert.Equal(t, holder, setAlarm(t, b, "moved", start.Add(5*time.Second)), "holder of the second set")
			last := start.Add(4 * time.Second)
			assert.Equal(t, holder, setAlarm(t, cc, "moved", last), "holder of the third set")

			end := c.waitOK("moved")
			c.waitCleared(b, "moved")
			time.Sleep(settleTime)
			runs := c.kind("moved", "run")
			require.Len(t, runs, 1, "runs; %s\n%s", c.lost(), c.dump())
			r := runs[0]
			assert.Equal(t, last.UnixMilli(), r.due, "the time it ran for")
			assert.Equal(t, uint64(3), r.gen, "the generation it ran for")
			assert.Equal(t, a.node, r.node, "ran on")
			assert.False(t, r.at.Before(last.Truncate(time.Millisecond)), "ran at %v, before its time %v", r.at, last)
			assert.Equal(t, uint64(3), end.gen)
		})
	}
}

// A handler that fails twice: retried about 2 s and then 4 s later (each
// wait at least the backoff, the second longer than the first), on the
// holder; the third run succeeds and the alarm is cleared.
func TestAlarmRetriedWithBackoff(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			c := newAlarmCluster(t, be.New(t))
			c.start("A")
			b := c.start("B")
			c.start("C")
			actor := prefixFail2 + "x"
			holder := setAlarm(t, b, actor, time.Now().Add(time.Second))
			c.waitOK(actor)
			c.waitCleared(b, actor)
			time.Sleep(settleTime)
			runs, ends := c.kind(actor, "run"), c.kind(actor, "end")
			require.Len(t, runs, 3, "runs; %s\n%s", c.lost(), c.dump())
			require.Len(t, ends, 3, "ends; %s\n%s", c.lost(), c.dump())
			for i := range 3 {
				assert.Equal(t, i, runs[i].retry, "run %d: retry", i)
				assert.Equal(t, i == 2, ends[i].ok, "run %d: ok", i)
				assert.Equal(t, holder, runs[i].node, "run %d: node", i)
				assert.Equal(t, runs[0].gen, runs[i].gen, "run %d: the alarm", i)
			}
			gap1, gap2 := runs[1].at.Sub(ends[0].at), runs[2].at.Sub(ends[1].at)
			t.Logf("waits before the retries: %v, %v", gap1, gap2)
			assert.GreaterOrEqual(t, gap1, alarm.DefaultBackoff, "wait before the first retry")
			assert.GreaterOrEqual(t, gap2, 2*alarm.DefaultBackoff, "wait before the second retry")
			assert.Greater(t, gap2, gap1, "the waits grew")
		})
	}
}

// The holder is SIGKILLed before the alarm is due: another node runs it,
// once, in a later epoch, no sooner than the dead holder's lease could
// have run out.
func TestAlarmRunsOnceAfterHolderKilled(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			c := newAlarmCluster(t, be.New(t))
			a, b := c.start("A"), c.start("B")
			c.start("C")
			due := time.Now().Add(1500 * time.Millisecond)
			require.Equal(t, a.node, setAlarm(t, a, "killed", due))
			_, body, _ := alarmReq(t, a, http.MethodGet, "killed", "")
			killed := time.Now()
			a.kill()
			require.Empty(t, c.kind("killed", "run"), "ran before its time")

			c.waitOK("killed")
			c.waitCleared(b, "killed")
			time.Sleep(settleTime)
			runs := c.kind("killed", "run")
			require.Len(t, runs, 1, "runs; %s\n%s", c.lost(), c.dump())
			r := runs[0]
			assert.NotEqual(t, "A", r.child, "ran on the killed node")
			assert.Greater(t, r.epoch, frames.Epoch(1), "epoch of the run: the actor's next session")
			assert.Equal(t, due.UnixMilli(), r.due, "the time it ran for (alarm was %s)", body)
			// A answered the GET just before the kill, so its last renewal
			// began less than a lease before; a peer claims once it has
			// seen that heartbeat unchanged for lease + grace: at least
			// grace after the kill.
			assert.GreaterOrEqual(t, r.at.Sub(killed), alarmGrace-100*time.Millisecond, "ran after the kill")
			assert.False(t, r.at.Before(due.Truncate(time.Millisecond)), "ran at %v, before its time %v", r.at, due)
			t.Logf("ran %v after its time, %v after the kill", r.at.Sub(due), r.at.Sub(killed))
		})
	}
}

// The holder is SIGKILLed while its handler runs: the run never ended, so
// another node runs the alarm again (at least once) and it is cleared only
// then; nothing is lost.
func TestAlarmRunsAgainWhenHolderKilledWhileRunning(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			c := newAlarmCluster(t, be.New(t))
			a := c.start("A", envAlarmHang+"=1")
			b := c.start("B")
			c.start("C")
			actor := prefixHang + "x"
			due := time.Now().Add(time.Second)
			require.Equal(t, a.node, setAlarm(t, a, actor, due))
			if !waitFor(func() bool { return len(c.kind(actor, "run")) > 0 }) {
				t.Fatalf("the alarm never ran on A\n%s", c.dump())
			}
			a.kill()
			first := c.kind(actor, "run")
			require.Len(t, first, 1)
			require.Equal(t, "A", first[0].child)
			require.Empty(t, c.kind(actor, "end"), "the hanging run ended")

			end := c.waitOK(actor)
			c.waitCleared(b, actor)
			runs := c.kind(actor, "run")
			require.GreaterOrEqual(t, len(runs), 2, "runs; %s\n%s", c.lost(), c.dump())
			for _, r := range runs[1:] {
				assert.NotEqual(t, "A", r.child, "ran on the killed node after the kill")
				assert.Equal(t, first[0].gen, r.gen, "the alarm that ran again")
				assert.Equal(t, due.UnixMilli(), r.due)
				assert.Greater(t, r.epoch, first[0].epoch)
			}
			assert.NotEqual(t, "A", end.child)
		})
	}
}
