package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/require"
)

// testClient is what the tests' callers use: generous timeouts (a
// forwarded request to a paused holder waits lease + grace before its 503).
var testClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, Proxy: nil},
}

// reply is one HTTP exchange as the caller saw it.
type reply struct {
	status     int
	node       string       // X-Node: who executed it
	epoch      frames.Epoch // X-Actor-Epoch
	via        string       // X-Actorhost-Via: who forwarded it
	retryAfter string
	body       []byte
	err        error // no HTTP answer at all
}

func (r reply) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("%d %s", r.status, strings.TrimSpace(string(r.body)))
}

func do(ctx context.Context, method, url, body string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return reply{err: err}
	}
	resp, err := testClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, node: resp.Header.Get(hdrNode), via: resp.Header.Get(hdrVia),
		retryAfter: resp.Header.Get("Retry-After"), body: data, err: err}
	if e := resp.Header.Get(hdrEpoch); e != "" {
		r.epoch, _ = frames.ParseEpoch(e)
	}
	return r
}

func actorURL(p *proc, ns, id, op string) string {
	return "http://" + p.addr + "/actor/" + ns + "/" + id + "/" + op
}

// retryDelay is how long a caller waits after a 503: Retry-After, as the
// server asks.
func retryDelay(r reply) time.Duration {
	if s, err := strconv.Atoi(r.retryAfter); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 100 * time.Millisecond
}

// ack is one acknowledged write (HTTP 200).
type ack struct {
	body  string
	id    int64 // note ID, or counter value
	node  string
	epoch frames.Epoch
	sent  time.Time // when the request left
	at    time.Time // when the answer came
}

// stream is one caller writing notes to one actor, one request at a time,
// each with a body no other request ever carries ("<actor>#<seq>"), through
// a node chosen at random for each attempt. A failed attempt is not
// repeated with the same body: a duplicate in the end is then a bug.
type stream struct {
	ns, id string
	// pad, if positive, is how many bytes of random hex text follow
	// "<actor>#<seq> " in each body: notes that weigh what a real
	// database's rows do.
	pad int

	mu         sync.Mutex
	next       int // sequence of the next body
	acks       []ack
	attempts   int
	unavail    int      // 503 + Retry-After
	unexpected []string // anything else, but for errors from nodes going down
	connErrs   connErrors
}

// connErrors are errors without an HTTP answer, judged at the end: they
// are expected from a node that was going down (see proc.excuses).
type connErrors struct {
	mu   sync.Mutex
	errs []connErr
}

type connErr struct {
	p   *proc
	at  time.Time
	msg string
}

func (ce *connErrors) add(p *proc, msg string) {
	ce.mu.Lock()
	ce.errs = append(ce.errs, connErr{p, time.Now(), msg})
	ce.mu.Unlock()
}

// unexpected returns the errors no node going down explains.
func (ce *connErrors) unexpected() []string {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	var out []string
	for _, e := range ce.errs {
		if !e.p.excuses(e.at) {
			out = append(out, e.msg)
		}
	}
	return out
}

func (s *stream) lastAck() (ack, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.acks) == 0 {
		return ack{}, false
	}
	return s.acks[len(s.acks)-1], true
}

// acksSentAfter returns the acknowledgements of requests sent after t.
func (s *stream) acksSentAfter(t time.Time) []ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ack
	for _, a := range s.acks {
		if a.sent.After(t) {
			out = append(out, a)
		}
	}
	return out
}

// workload runs one stream per actor against a cluster.
type workload struct {
	c       *cluster
	streams []*stream
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startWorkload(t testing.TB, c *cluster, ns string, actors int) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{c: c, ctx: ctx, cancel: cancel}
	for i := range actors {
		s := &stream{ns: ns, id: fmt.Sprintf("actor-%02d", i)}
		w.streams = append(w.streams, s)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.write(s)
		}()
	}
	t.Cleanup(w.stop)
	return w
}

// post sends the stream's next note to p and records the attempt, and
// the acknowledgement if it is one.
func (s *stream) post(ctx context.Context, p *proc) (reply, string) {
	s.mu.Lock()
	body := fmt.Sprintf("%s#%d", s.id, s.next)
	s.next++
	pad := s.pad
	s.mu.Unlock()
	if pad > 0 {
		raw := make([]byte, (pad+1)/2)
		rand.Read(raw)
		body += " " + hex.EncodeToString(raw)[:pad]
	}
	sent := time.Now()
	r := do(ctx, http.MethodPost, actorURL(p, s.ns, s.id, "notes"), body)
	if ctx.Err() != nil {
		return r, body // the answer, if any, is unknown: unacknowledged
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	switch {
	case r.err == nil && r.status == http.StatusOK:
		var v struct{ ID int64 }
		if err := json.Unmarshal(r.body, &v); err != nil || v.ID == 0 {
			s.unexpected = append(s.unexpected, fmt.Sprintf("%s via node%d: 200 with %q", body, p.slot, r.body))
			break
		}
		s.acks = append(s.acks, ack{body: body, id: v.ID, node: r.node, epoch: r.epoch, sent: sent, at: time.Now()})
	case r.err == nil && r.status == http.StatusServiceUnavailable && r.retryAfter != "":
		s.unavail++
	case r.err != nil:
		// Fine if it was going down (killed, paused, draining, lease
		// lapsed): judged at the end.
		s.connErrs.add(p, fmt.Sprintf("%s via node%d: %v", body, p.slot, r))
	default:
		s.unexpected = append(s.unexpected, fmt.Sprintf("%s via node%d: %v", body, p.slot, r))
	}
	return r, body
}

// postUntilOK posts the stream's next notes to p until one is
// acknowledged, waiting as Retry-After says between attempts.
func (s *stream) postUntilOK(ctx context.Context, p *proc) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	for {
		r, _ := s.post(ctx, p)
		if r.err == nil && r.status == http.StatusOK {
			return r, nil
		}
		if ctx.Err() != nil {
			return r, fmt.Errorf("%s: no write acknowledged via node%d: %w (last answer: %v)", s.id, p.slot, ctx.Err(), r)
		}
		sleepCtx(ctx, retryDelay(r))
	}
}

func (w *workload) write(s *stream) {
	for w.ctx.Err() == nil {
		p := w.c.pick()
		if p == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		r, _ := s.post(w.ctx, p)
		switch {
		case r.err == nil && r.status == http.StatusOK:
		case r.err == nil && r.status == http.StatusServiceUnavailable:
			sleepCtx(w.ctx, retryDelay(r))
		case r.err != nil:
			sleepCtx(w.ctx, 20*time.Millisecond)
		default:
			sleepCtx(w.ctx, 100*time.Millisecond)
		}
	}
}

func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
}

// check fails the test on anything unexpected the streams saw.
func (w *workload) checkNoUnexpected(t testing.TB) {
	t.Helper()
	for _, s := range w.streams {
		s.mu.Lock()
		for _, u := range append(s.unexpected, s.connErrs.unexpected()...) {
			t.Errorf("%s: unexpected answer: %s", s.id, u)
		}
		s.mu.Unlock()
	}
}

func (w *workload) totals() (attempts, acks, unavail int) { return totals(w.streams) }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// startRound begins a round of a takeover test: it waits (up to
// hangGuard) until every actor of the workload has acknowledged a write
// sent from now on, and fails the test if one never does.
func (w *workload) startRound(t *testing.T, round int) {
	t.Helper()
	since := time.Now()
	if !waitFor(t.Context(), hangGuard, func() bool {
		for _, s := range w.streams {
			if len(s.acksSentAfter(since)) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("round %d: not every actor acknowledged a write", round)
	}
}

// owners counts, per node, the actors whose latest acknowledgement it made.
func (w *workload) owners() map[string][]*stream {
	out := map[string][]*stream{}
	for _, s := range w.streams {
		if a, ok := s.lastAck(); ok {
			out[a.node] = append(out[a.node], s)
		}
	}
	return out
}

// checkEpochs fails the test if two nodes acknowledged writes to one actor
// in the same epoch, or if in commit order (note ids) an actor's
// acknowledgements go back to an older epoch.
func checkEpochs(t testing.TB, c *cluster, actor string, acks []ack) {
	t.Helper()
	byID := slices.Clone(acks)
	slices.SortFunc(byID, func(x, y ack) int { return int(x.id - y.id) })
	byEpoch := map[frames.Epoch]string{}
	var last frames.Epoch
	for _, a := range byID {
		if a.epoch == 0 || a.node == "" {
			t.Errorf("%s: %q acknowledged without X-Node/X-Actor-Epoch", actor, a.body)
			continue
		}
		if n, ok := byEpoch[a.epoch]; ok && n != a.node {
			t.Errorf("%s: epoch %d acknowledged by two nodes: %s and %s", actor, a.epoch, c.nodeName(n), c.nodeName(a.node))
		}
		byEpoch[a.epoch] = a.node
		if a.epoch < last {
			t.Errorf("%s: %q (id %d) committed in epoch %d after a commit in epoch %d", actor, a.body, a.id, a.epoch, last)
		}
		last = max(last, a.epoch)
	}
}

// checkNotes fails the test unless notes (an actor's final state) hold
// every acknowledged write with the ID it was acknowledged with (so in
// order), and no body twice.
func checkNotes(t testing.TB, where, actor string, acks []ack, notes []note) {
	t.Helper()
	seen := map[string]int64{}
	for _, n := range notes {
		if id, dup := seen[n.Body]; dup {
			t.Errorf("%s: %s: note %q twice (ids %d and %d)", where, actor, n.Body, id, n.ID)
		}
		seen[n.Body] = n.ID
	}
	missing := 0
	for _, a := range acks {
		id, ok := seen[a.body]
		switch {
		case !ok:
			missing++
			if missing <= 5 {
				t.Errorf("%s: %s: acknowledged note %q (id %d, epoch %d) is lost", where, actor, a.body, a.id, a.epoch)
			}
		case id != a.id:
			t.Errorf("%s: %s: acknowledged note %q had id %d, now %d", where, actor, a.body, a.id, id)
		}
	}
	if missing > 5 {
		t.Errorf("%s: %s: %d acknowledged notes lost in all", where, actor, missing)
	}
	// Acknowledged writes keep their order: a write acknowledged before
	// another was sent has the smaller id (AUTOINCREMENT ids follow
	// commit order). Concurrent writes may commit in any order.
	bySent := slices.Clone(acks)
	slices.SortFunc(bySent, func(x, y ack) int { return x.sent.Compare(y.sent) })
	byAt := slices.Clone(acks)
	slices.SortFunc(byAt, func(x, y ack) int { return x.at.Compare(y.at) })
	var before ack // the acknowledgement with the largest id among those before the current send
	j := 0
	for _, a := range bySent {
		for ; j < len(byAt) && byAt[j].at.Before(a.sent); j++ {
			if byAt[j].id > before.id {
				before = byAt[j]
			}
		}
		if before.id != 0 && a.id <= before.id {
			t.Errorf("%s: %s: %q (id %d) was sent after %q (id %d) was acknowledged, yet comes before it", where, actor, a.body, a.id, before.body, before.id)
		}
	}
}

// getNotes reads an actor's notes through the cluster, retrying per
// Retry-After, until it succeeds or ctx ends.
func getNotes(ctx context.Context, c *cluster, ns, id string) ([]note, reply, error) {
	for {
		p := c.pick()
		if p == nil {
			return nil, reply{}, fmt.Errorf("no live node")
		}
		r := do(ctx, http.MethodGet, actorURL(p, ns, id, "notes"), "")
		if r.err == nil && r.status == http.StatusOK {
			var notes []note
			if err := json.Unmarshal(r.body, &notes); err != nil {
				return nil, r, fmt.Errorf("notes of %s: %w", id, err)
			}
			return notes, r, nil
		}
		if ctx.Err() != nil {
			return nil, r, fmt.Errorf("reading notes of %s: %w (last answer: %v)", id, ctx.Err(), r)
		}
		if r.err == nil && r.status != http.StatusServiceUnavailable {
			return nil, r, fmt.Errorf("reading notes of %s via node%d: %v", id, p.slot, r)
		}
		sleepCtx(ctx, retryDelay(r))
	}
}

// restoredNotes restores an actor from the bucket into a temporary file
// and reads its notes: the bucket's own view, independent of any node.
func restoredNotes(t testing.TB, b bucket.Bucket, ns, id string) ([]note, restore.Result) {
	t.Helper()
	a := frames.Actor{Namespace: frames.NamespaceID("", ns), Actor: frames.ActorKey([]byte(id))}
	dest := filepath.Join(t.TempDir(), "restored.sqlite")
	res, err := restore.Restore(t.Context(), b, a, dest, restore.Options{})
	require.NoError(t, err, "restoring %s", id)
	db, err := sql.Open("sqlite3", "file:"+dest+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT id, body FROM notes ORDER BY id`)
	require.NoError(t, err, "restored %s", id)
	defer rows.Close()
	var out []note
	for rows.Next() {
		var n note
		require.NoError(t, rows.Scan(&n.ID, &n.Body))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out, res
}

// actorSeqs reads actor ns/id's line of p's GET /status: the last commit
// p captured and the last one in the bucket.
func actorSeqs(ctx context.Context, p *proc, ns, id string) (captured, durable frames.Seq, err error) {
	r := do(ctx, http.MethodGet, "http://"+p.addr+"/status", "")
	if r.err != nil || r.status != http.StatusOK {
		return 0, 0, fmt.Errorf("status of node%d: %v", p.slot, r)
	}
	var st struct{ Actors []actorStatus }
	if err := json.Unmarshal(r.body, &st); err != nil {
		return 0, 0, fmt.Errorf("status of node%d: %w", p.slot, err)
	}
	for _, a := range st.Actors {
		if a.Namespace == ns && a.ID == id {
			return a.Captured, a.Durable, nil
		}
	}
	return 0, 0, fmt.Errorf("node%d does not hold %s/%s", p.slot, ns, id)
}

func actorOf(ns, id string) frames.Actor {
	return frames.Actor{Namespace: frames.NamespaceID("", ns), Actor: frames.ActorKey([]byte(id))}
}
