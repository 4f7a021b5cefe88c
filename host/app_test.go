package host

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3" for database/sql
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// The tests' runtime: each actor holds notes; POST appends the body as a
// note, GET lists them. Every answer names the node and epoch that ran it.

// Test timings: a node is fenced 1.5 s after its last heartbeat was seen.
const (
	testLease = time.Second
	testGrace = 500 * time.Millisecond
)

// hangGuard bounds every wait for something that must happen: reaching it
// fails the test as "never happened", not as "too slow".
const hangGuard = 90 * time.Second

// Answer headers of the notes app.
const (
	hdrNode  = "X-Node"
	hdrEpoch = "X-Epoch"
)

// notesHooks opens a pool per actor and counts the opens and closes.
type notesHooks struct {
	opened, closed atomic.Int64
	// onOpened, if set, runs inside Hooks.Opened after the schema.
	onOpened func(ctx context.Context, a *Actor) error
}

func (n *notesHooks) hooks() Hooks {
	return Hooks{
		Opened: func(ctx context.Context, a *Actor) error {
			pool, err := sql.Open("sqlite3", a.DB().DSN())
			if err != nil {
				return err
			}
			if _, err := pool.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
				pool.Close()
				return err
			}
			a.SetValue(pool)
			n.opened.Add(1)
			if n.onOpened != nil {
				if err := n.onOpened(ctx, a); err != nil {
					pool.Close()
					return err
				}
			}
			return nil
		},
		Closing: func(_ context.Context, a *Actor) {
			a.Value().(*sql.DB).Close()
			n.closed.Add(1)
		},
	}
}

func addNote(ctx context.Context, a *Actor, body string) error {
	_, err := a.Value().(*sql.DB).ExecContext(ctx, `INSERT INTO notes(body) VALUES(?)`, body)
	return err
}

func listNotes(ctx context.Context, a *Actor) ([]string, error) {
	rows, err := a.Value().(*sql.DB).QueryContext(ctx, `SELECT body FROM notes ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// routeByPath is the Route of the test apps: the actor {id} of namespace
// {ns} in the request's path.
func routeByPath(r *http.Request) (string, []byte, error) {
	return r.PathValue("ns"), []byte(r.PathValue("id")), nil
}

// gateReply ends a test app's request whose work returned err: once the
// work succeeded, the output gate (Durable); on an error, 503 with
// Retry-After, and false; else the node and epoch headers, and true: the
// caller writes the body.
func gateReply(w http.ResponseWriter, r *http.Request, h *Host, a *Handle, err error) bool {
	if err == nil {
		err = a.DB().Durable(r.Context()) // the output gate
	}
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return false
	}
	w.Header().Set(hdrNode, h.Node().ID())
	w.Header().Set(hdrEpoch, a.Epoch().String())
	return true
}

// notesHandler serves /actor/{ns}/{id} with the notes app.
func notesHandler(h *Host, served *atomic.Int64, opts HandlerOptions) http.Handler {
	opts.Route = routeByPath
	opts.Serve = func(w http.ResponseWriter, r *http.Request, a *Handle) {
		if served != nil {
			served.Add(1)
		}
		ctx := r.Context()
		var out any = map[string]string{}
		var err error
		switch r.Method {
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			err = addNote(ctx, a.Actor, string(body))
		default:
			out, err = listNotes(ctx, a.Actor)
		}
		if gateReply(w, r, h, a, err) {
			json.NewEncoder(w).Encode(out)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/actor/{ns}/{id}", h.Handler(opts))
	return mux
}

// served is a host with an HTTP server on 127.0.0.1.
type served struct {
	*Host
	addr      string
	served    atomic.Int64 // requests Serve ran
	forwarded atomic.Int64 // requests that arrived with HeaderForwarded
	hooks     *notesHooks
}

// startServed starts a host serving the notes app over HTTP. cfg's
// Bucket, Address, Dir, Hooks and timings are filled in when zero.
func startServed(t testing.TB, b bucket.Bucket, cfg Config, hopts HandlerOptions) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &served{addr: ln.Addr().String(), hooks: &notesHooks{}}
	cfg = testConfig(t, b, s.addr, cfg)
	if cfg.Hooks.Opened == nil {
		cfg.Hooks = s.hooks.hooks()
	}
	h, err := New(t.Context(), cfg)
	require.NoError(t, err)
	s.Host = h
	inner := notesHandler(h, &s.served, hopts)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(HeaderForwarded) != "" {
				s.forwarded.Add(1)
			}
			inner.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		srv.Shutdown(ctx)
		h.Close(ctx)
	})
	return s
}

// testConfig fills in what a test left zero.
func testConfig(t testing.TB, b bucket.Bucket, addr string, cfg Config) Config {
	cfg.Bucket = b
	if cfg.Address == "" {
		cfg.Address = addr
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Lease == 0 {
		cfg.Lease, cfg.Grace = testLease, testGrace
	}
	if cfg.Idle == 0 {
		cfg.Idle = -1 // tests that hibernate say so
	}
	if cfg.SweepAge == 0 {
		cfg.SweepAge = -1
	}
	return cfg
}

// newHost starts a host without HTTP (its address is never dialled).
func newHost(t testing.TB, b bucket.Bucket, cfg Config) *Host {
	t.Helper()
	cfg = testConfig(t, b, "127.0.0.1:1", cfg)
	h, err := New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		h.Close(ctx)
	})
	return h
}

var testClient = &http.Client{Timeout: hangGuard, Transport: &http.Transport{Proxy: nil}}

// reply is one HTTP exchange.
type reply struct {
	status     int
	node       string
	epoch      frames.Epoch
	via        string
	retryAfter string
	body       string
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, strings.TrimSpace(r.body)) }

func do(t testing.TB, method, addr, ns, id, body string, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+"/actor/"+ns+"/"+id, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{status: resp.StatusCode, node: resp.Header.Get(hdrNode), via: resp.Header.Get(HeaderVia),
		retryAfter: resp.Header.Get("Retry-After"), body: string(data)}
	r.epoch, _ = frames.ParseEpoch(resp.Header.Get(hdrEpoch))
	return r
}

func ownRecord(t testing.TB, b bucket.Bucket, ns, id string) fence.Record {
	t.Helper()
	rec, _, err := fence.ReadRecord(t.Context(), b, actorOf(ns, id))
	require.NoError(t, err)
	return rec
}

func actorOf(ns, id string) frames.Actor {
	return frames.Actor{Namespace: frames.NamespaceID("", ns), Actor: frames.ActorKey([]byte(id))}
}

// waitFor polls cond every 20 ms until it holds; false after hangGuard (a
// guard against hanging, not a performance threshold).
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// The child process: a host on the bucket and directory the parent names,
// serving the notes app over HTTP, that opens one actor, writes a note,
// prints "ready ADDR NODE EPOCH" and serves until killed.
const (
	envChild       = "FRAMECTL_HOST_TEST_CHILD" // the actor to open
	envChildBucket = "FRAMECTL_HOST_TEST_BUCKET"
	envChildDir    = "FRAMECTL_HOST_TEST_DIR"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(envAlarmChild); name != "" {
		if err := runAlarmChild(name); err != nil {
			fmt.Fprintln(os.Stderr, "alarm child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if id := os.Getenv(envChild); id != "" {
		if err := runChild(id); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childBucket opens the bucket a child is given and a listener for its
// host on a free port.
func childBucket(ctx context.Context) (bucket.Bucket, net.Listener, error) {
	b, err := bucket.Open(ctx, os.Getenv(envChildBucket))
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	return b, ln, err
}

func runChild(id string) error {
	ctx := context.Background()
	b, ln, err := childBucket(ctx)
	if err != nil {
		return err
	}
	hooks := &notesHooks{}
	h, err := New(ctx, Config{
		Bucket: b, Address: ln.Addr().String(), Dir: os.Getenv(envChildDir),
		Lease: testLease, Grace: testGrace, Idle: -1, SweepAge: -1, Hooks: hooks.hooks(),
	})
	if err != nil {
		return err
	}
	go http.Serve(ln, notesHandler(h, nil, HandlerOptions{}))
	a, err := h.Acquire(ctx, "ns", []byte(id))
	if err != nil {
		return err
	}
	if err := addNote(ctx, a.Actor, "from the child"); err != nil {
		return err
	}
	if err := a.DB().Durable(ctx); err != nil {
		return err
	}
	a.Release()
	fmt.Printf("ready %s %s %d\n", h.Address(), h.Node().ID(), a.Epoch())
	select {} // until killed
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	addr  string
	node  string
	epoch frames.Epoch
}

// startChild runs a child host on b and dir that opens actor id.
func startChild(t *testing.T, b bucket.Bucket, dir, id string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+id, envChildBucket+"="+b.String(), envChildDir+"="+dir)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd}
	t.Cleanup(c.kill)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	select {
	case line, ok := <-lines:
		f := strings.Fields(line)
		if !ok || len(f) != 4 || f[0] != "ready" {
			c.kill()
			t.Fatalf("child printed %q\n%s", line, stderr.String())
		}
		c.addr, c.node = f[1], f[2]
		c.epoch, err = frames.ParseEpoch(f[3])
		require.NoError(t, err)
	case <-time.After(hangGuard):
		c.kill()
		t.Fatalf("the child did not start\n%s", stderr.String())
	}
	return c
}

// kill sends SIGKILL and waits for the process to end.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.cmd.Process.Kill()
	c.cmd.Wait() // "signal: killed"
}

// syncBuffer is a bytes.Buffer safe for a child's stderr and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bytesReader(p []byte) *bytes.Reader { return bytes.NewReader(p) }
