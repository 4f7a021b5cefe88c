package host

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/session"
)

// The scale benchmarks' settings, from the environment, so that a plain
// `go test -bench HostScale` stays quick and the full measurement
// (BENCHMARKS.md, "Host scale") is one command.
const (
	// envScaleN: comma-separated actor counts (default 100): the actors
	// held in BenchmarkHostScale, the other actors in
	// BenchmarkHostScaleOthers.
	envScaleN = "FRAMECTL_SCALE_N"
	// envScaleWindow: how long the held actors sit idle while the
	// bucket's requests are counted (default 10s).
	envScaleWindow = "FRAMECTL_SCALE_WINDOW"
	// envScaleConn=kept: each actor keeps a SQLite connection open (a
	// runtime's pool, made in Hooks.Opened); by default the write's
	// connection is closed and an idle actor has none.
	envScaleConn = "FRAMECTL_SCALE_CONN"
	// envScaleHeld: the actors the host holds in BenchmarkHostScaleOthers
	// (default 100).
	envScaleHeld = "FRAMECTL_SCALE_HELD"
	// envScaleAlarm=1: each actor's write also sets its alarm, an hour
	// away (the host then keeps a connection pool for it).
	envScaleAlarm = "FRAMECTL_SCALE_ALARM"
	// envScaleBlob: the bytes of each actor's one row (default: a short
	// string), for what a larger transaction leaves an idle actor.
	envScaleBlob = "FRAMECTL_SCALE_BLOB"
	// envScaleWarmup: how long BenchmarkHostScaleOthers lets the host run
	// before it counts (default 0): the scans read the own.json of an
	// entry left to a live holder less and less often, so the first
	// minutes count more than the ones after.
	envScaleWarmup = "FRAMECTL_SCALE_WARMUP"
	// envScaleHeapProfile: a file to write a heap profile to while the
	// actors are held (go tool pprof -sample_index=inuse_space).
	envScaleHeapProfile = "FRAMECTL_SCALE_HEAPPROFILE"
)

func writeHeapProfile(b *testing.B) {
	b.Helper()
	path := os.Getenv(envScaleHeapProfile)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	require.NoError(b, err)
	defer f.Close()
	require.NoError(b, pprof.WriteHeapProfile(f))
}

// scaleMode is how each actor is written and kept.
type scaleMode struct {
	kept  bool // a connection pool made in Hooks.Opened, kept open
	alarm bool // the write sets the actor's alarm
	blob  int  // bytes of the row written (0: a short string)
}

// name is what the mode adds to a benchmark's name ("" for the default),
// so that runs in different modes print rows of different names.
func (m scaleMode) name() string {
	var s string
	if m.alarm {
		s += "/alarm=1"
	}
	if m.kept {
		s += "/conn=kept"
	}
	if m.blob > 0 {
		s += fmt.Sprintf("/blob=%d", m.blob)
	}
	return s
}

func scaleModeOf() scaleMode {
	m := scaleMode{kept: os.Getenv(envScaleConn) == "kept", alarm: os.Getenv(envScaleAlarm) == "1"}
	m.blob, _ = strconv.Atoi(os.Getenv(envScaleBlob))
	return m
}

const scaleNS = "ns"

func scaleInts(b *testing.B, env, def string) []int {
	b.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		raw = def
	}
	var out []int
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "%s=%q", env, raw)
		out = append(out, n)
	}
	return out
}

func scaleDuration(b *testing.B, env string, def time.Duration) time.Duration {
	b.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		return def
	}
	d, err := time.ParseDuration(raw)
	require.NoError(b, err, "%s=%q", env, raw)
	return d
}

func scaleWindow(b *testing.B) time.Duration { return scaleDuration(b, envScaleWindow, 10*time.Second) }

// BenchmarkHostScale holds many small actors on one host: N actors, each
// acquired (all at once, opened Config.MaxOpens at a time), written once
// (one row, Durable) and released, then held idle (Idle is an hour) while
// the bucket's requests are counted for FRAMECTL_SCALE_WINDOW, then
// hibernated all at once. It reports, per idle held actor, the live heap,
// the resident set, goroutines and open file descriptors above the host
// without actors; the time to acquire and to release all N; the requests
// per actor of each; and the requests per minute by kind while idle. The
// host runs with the defaults (lease 10 s + 5 s, alarm scans every 2 s of
// a namespace with a handler), except sweeps, which
// BenchmarkHostScaleOthers measures. A mode set by FRAMECTL_SCALE_ALARM,
// FRAMECTL_SCALE_CONN or FRAMECTL_SCALE_BLOB is in the benchmark's name
// (dir/actors=1000/alarm=1), so that one table can hold the runs of
// several modes (framebench table). It asserts no time.
func BenchmarkHostScale(b *testing.B) {
	window := scaleWindow(b)
	mode := scaleModeOf()
	for _, be := range buckettest.Backends() {
		for _, n := range scaleInts(b, envScaleN, "100") {
			b.Run(fmt.Sprintf("%s/actors=%d%s", be.Name, n, mode.name()), func(b *testing.B) {
				raw := be.New(b)
				cb := buckettest.NewCounting(raw)
				warns := &warnCounter{}
				h := scaleHost(b, cb, raw, mode, warns)
				round := 0
				for b.Loop() {
					round++
					base := measureProcess()
					ids := scaleIDs(fmt.Sprintf("r%d-", round), n)
					acq := acquireAll(b, h, cb, ids, mode)
					settled := settledProcess(b, h, n)
					idle := countIdle(cb, window)
					// After the window: an actor's alarm connection has
					// been idle long enough to close (alarmConnIdle).
					held := measureProcess()
					writeHeapProfile(b)
					rel := hibernateAll(b, h, cb)
					after := measureProcess()
					per := func(x, y int64) float64 { return float64(x-y) / float64(n) }
					b.ReportMetric(per(held.heap, base.heap), "heapB/actor")
					b.ReportMetric(per(held.rss, base.rss), "rssB/actor")
					b.ReportMetric(per(held.goroutines, base.goroutines), "goroutines/actor")
					if base.fds >= 0 {
						b.ReportMetric(per(held.fds, base.fds), "fds/actor")
					}
					b.ReportMetric(acq.took.Seconds(), "acquire-s")
					b.ReportMetric(rel.took.Seconds(), "release-s")
					b.ReportMetric(float64(acq.reqs.Total())/float64(n), "acquire-req/actor")
					b.ReportMetric(float64(rel.reqs.Total())/float64(n), "release-req/actor")
					b.ReportMetric(float64(acq.peakFDs), "acquire-peak-fds")
					b.ReportMetric(float64(rel.peakFDs), "release-peak-fds")
					b.ReportMetric(float64(warns.n.Load()), "warnings")
					reportIdle(b, idle)
					b.Logf("%d actors (%s, %+v): heap %+d B, rss %+d B, goroutines %+d (%+d before the window), fds %+d; acquire %v (%s); release %v (%s); after release: goroutines %+d, fds %+d",
						n, be.Name, mode, held.heap-base.heap, held.rss-base.rss, held.goroutines-base.goroutines, settled.goroutines-base.goroutines, held.fds-base.fds,
						acq.took, acq.reqs, rel.took, rel.reqs, after.goroutines-base.goroutines, after.fds-base.fds)
					b.Logf("host log: %s", warns)
				}
			})
		}
	}
}

// BenchmarkHostScaleOthers counts what a host holding FRAMECTL_SCALE_HELD
// idle actors asks the bucket per minute while M other actors (each N of
// FRAMECTL_SCALE_N) exist that it does not hold: half held by another
// live node (a fence node renewing its lease; its Claim wrote own.json)
// with an alarm overdue by a minute, as a holder leaves it while its
// handler runs long, retries, or when it has no handler for the
// namespace; half held by nobody, with an alarm an hour away. It then
// counts two lease sweeps (sweepLoop's) with a stale lease present that
// an own.json names, as a node that died holding an actor leaves one.
func BenchmarkHostScaleOthers(b *testing.B) {
	window := scaleWindow(b)
	warmup := scaleDuration(b, envScaleWarmup, 0)
	held := scaleInts(b, envScaleHeld, "100")[0]
	for _, be := range buckettest.Backends() {
		for _, m := range scaleInts(b, envScaleN, "100") {
			b.Run(fmt.Sprintf("%s/held=%d/others=%d", be.Name, held, m), func(b *testing.B) {
				ctx := b.Context()
				raw := be.New(b)
				other, err := fence.Register(ctx, raw, "127.0.0.1:2", fence.Options{})
				require.NoError(b, err)
				b.Cleanup(func() { other.Close(context.Background()) })
				makeOthers(b, raw, other, m)
				cb := buckettest.NewCounting(raw)
				warns := &warnCounter{}
				h := scaleHost(b, cb, raw, scaleMode{}, warns)
				round := 0
				for b.Loop() {
					round++
					acquireAll(b, h, cb, scaleIDs(fmt.Sprintf("r%d-", round), held), scaleMode{})
					settledProcess(b, h, held)
					time.Sleep(warmup)
					idle := countIdle(cb, window)
					reportIdle(b, idle)
					// Sweeps (sweepLoop's) at a time when every lease is
					// over an hour old: each is stale, and kept only if an
					// own.json names its node, which the first sweep reads
					// every own.json to learn; the next one finds no other
					// lease gone stale.
					var kept sweptKept
					at := time.Now().Add(2 * time.Hour)
					sweepOnce := func() (phase, error) {
						before := cb.Counts()
						start := time.Now()
						deleted, err := sweep(ctx, cb, &kept, time.Hour, at)
						if err == nil && len(deleted) > 0 {
							err = fmt.Errorf("swept %v: both leases are named by an own.json", deleted)
						}
						return phase{took: time.Since(start), reqs: cb.Counts().Since(before)}, err
					}
					first, err := sweepOnce()
					require.NoError(b, err)
					next, err := sweepOnce()
					require.NoError(b, err)
					b.ReportMetric(float64(first.reqs.Total()), "sweep1-req")
					b.ReportMetric(first.took.Seconds(), "sweep1-s")
					b.ReportMetric(float64(next.reqs.Total()), "sweep2-req")
					b.Logf("held %d, others %d (%s): idle %v: %s; first sweep %v: %s; next sweep %v: %s; host log: %s",
						held, m, be.Name, idle.window, idle.reqs, first.took, first.reqs, next.took, next.reqs, warns)
					hibernateAll(b, h, cb)
				}
			})
		}
	}
}

// scaleHost starts a host with the defaults but for Idle (an hour: held
// actors stay held), sweeps (off), and a namespace with an alarm handler
// (so the scan runs as in a runtime that uses alarms). The upload
// interval is the default of the bucket under the counting wrapper
// (vfs picks it by the bucket's type).
func scaleHost(b *testing.B, cb *buckettest.Counting, raw bucket.Bucket, mode scaleMode, warns *warnCounter) *Host {
	b.Helper()
	cfg := Config{
		Logger: slog.New(warns),
		Lease:  fence.DefaultLease, Grace: fence.DefaultGrace,
		Idle:     time.Hour,
		SweepAge: -1,
		Alarms: map[string]AlarmFunc{scaleNS: func(context.Context, *Actor, alarm.Run) error {
			return nil
		}},
	}
	switch raw.(type) {
	case *bucket.S3:
		cfg.VFS.UploadInterval = session.DefaultS3UploadInterval
	default:
		cfg.VFS.UploadInterval = session.DefaultDirUploadInterval
	}
	if mode.kept {
		cfg.Hooks = Hooks{
			Opened: func(ctx context.Context, a *Actor) error {
				pool, err := sql.Open("sqlite3", a.DB().DSN())
				if err != nil {
					return err
				}
				if err := pool.PingContext(ctx); err != nil {
					pool.Close()
					return err
				}
				a.SetValue(pool)
				return nil
			},
			Closing: func(_ context.Context, a *Actor) { a.Value().(*sql.DB).Close() },
		}
	}
	return newHost(b, cb, cfg)
}

// warnCounter counts the host's warnings and errors (a close that could
// not flush or release, a failed renewal) and keeps the first few.
type warnCounter struct {
	n     atomic.Int64
	mu    sync.Mutex
	first []string
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if w.n.Add(1) <= 5 {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		w.mu.Lock()
		w.first = append(w.first, msg)
		w.mu.Unlock()
	}
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

func (w *warnCounter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d warnings %q", w.n.Load(), w.first)
}

func scaleIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ids
}

// phase is what one phase took: time, requests, and the most file
// descriptors the process had open meanwhile (sampled every 10 ms).
type phase struct {
	took    time.Duration
	reqs    buckettest.Counts
	peakFDs int
}

// watchFDs samples the open file descriptors until stop is called, which
// returns the most seen.
func watchFDs() (stop func() int) {
	done := make(chan struct{})
	peak := make(chan int)
	go func() {
		most := 0
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
				most = max(most, len(fds))
			}
			select {
			case <-done:
				peak <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() int { close(done); return <-peak }
}

// acquireAll acquires every actor at once, writes a row in each, waits
// for Durable and releases it.
func acquireAll(b *testing.B, h *Host, cb *buckettest.Counting, ids []string, mode scaleMode) phase {
	b.Helper()
	ctx := b.Context()
	before := cb.Counts()
	stop := watchFDs()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() { errs[i] = writeOnce(ctx, h, id, mode) })
	}
	wg.Wait()
	took := time.Since(start)
	peak := stop()
	for i, err := range errs {
		require.NoError(b, err, "actor %s", ids[i])
	}
	return phase{took: took, reqs: cb.Counts().Since(before), peakFDs: peak}
}

func writeOnce(ctx context.Context, h *Host, id string, mode scaleMode) error {
	hd, err := h.Acquire(ctx, scaleNS, []byte(id))
	if err != nil {
		return err
	}
	defer hd.Release()
	stmt := `CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB); INSERT INTO t(v) VALUES('hello')`
	if mode.blob > 0 {
		stmt = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB); INSERT INTO t(v) VALUES(randomblob(%d))`, mode.blob)
	}
	switch {
	case mode.kept || mode.alarm:
		pool, _ := hd.Value().(*sql.DB)
		if pool == nil {
			if pool, err = sql.Open("sqlite3", hd.DB().DSN()); err != nil {
				return err
			}
			defer pool.Close()
		}
		if _, err := pool.ExecContext(ctx, stmt); err != nil {
			return err
		}
		if mode.alarm {
			if _, err := hd.SetAlarm(ctx, pool, time.Now().Add(time.Hour)); err != nil {
				return err
			}
		}
	default:
		c, err := hd.DB().Conn()
		if err != nil {
			return err
		}
		err = c.Exec(stmt)
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return hd.DB().Durable(ctx)
}

// hibernateAll closes every actor of the host as the hibernation loop
// does (as if Idle had passed for all of them), and waits until they are
// gone.
func hibernateAll(b *testing.B, h *Host, cb *buckettest.Counting) phase {
	b.Helper()
	before := cb.Counts()
	stop := watchFDs()
	start := time.Now()
	h.hibernate(h.clock.Now().Add(2 * h.cfg.Idle))
	require.True(b, waitFor(func() bool { return len(h.Actors()) == 0 }), "actors left after hibernation: %d", len(h.Actors()))
	took := time.Since(start)
	return phase{took: took, reqs: cb.Counts().Since(before), peakFDs: stop()}
}

// process is what the process holds at one moment.
type process struct {
	heap, rss, goroutines, fds int64
}

// measureProcess collects garbage and reads the live heap, the resident
// set, the goroutines and the open file descriptors (-1 without
// /proc/self/fd).
func measureProcess() process {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := process{heap: int64(ms.HeapAlloc), goroutines: int64(runtime.NumGoroutine()), fds: -1}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		p.fds = int64(len(fds))
	}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				p.rss = kb << 10
			}
		}
	}
	return p
}

// settledProcess waits until all n actors are open and idle and the
// session starts' background work (their first compaction passes) has
// ended, then measures the process.
func settledProcess(b *testing.B, h *Host, n int) process {
	b.Helper()
	require.True(b, waitFor(func() bool {
		infos := h.Actors()
		if len(infos) != n {
			return false
		}
		for _, in := range infos {
			if in.State != Open || in.Handles != 0 {
				return false
			}
		}
		return true
	}), "actors not all open and idle: %d", len(h.Actors()))
	last := measureProcess()
	for range 20 {
		time.Sleep(500 * time.Millisecond)
		p := measureProcess()
		if p.goroutines == last.goroutines {
			return p
		}
		last = p
	}
	return last
}

// idleCount is what the bucket was asked while the actors sat idle.
type idleCount struct {
	window time.Duration
	reqs   buckettest.Counts
	cpu    time.Duration // the process's CPU time (user and system)
}

func countIdle(cb *buckettest.Counting, window time.Duration) idleCount {
	before := cb.Counts()
	cpu0 := cpuTime()
	start := time.Now()
	time.Sleep(window)
	took := time.Since(start)
	return idleCount{window: took, reqs: cb.Counts().Since(before), cpu: cpuTime() - cpu0}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportIdle reports requests per minute, in all and by kind, and CPU
// milliseconds per minute.
func reportIdle(b *testing.B, idle idleCount) {
	perMin := func(v int64) float64 { return float64(v) * float64(time.Minute) / float64(idle.window) }
	b.ReportMetric(perMin(idle.reqs.Total()), "req/min")
	for k, v := range idle.reqs {
		b.ReportMetric(perMin(v), k.String()+"/min")
	}
	b.ReportMetric(perMin(int64(idle.cpu/time.Millisecond)), "cpu-ms/min")
}

// makeOthers puts m actors in the bucket that the host under test does
// not hold: even ones claimed by other (own.json names it) with an index
// entry due a minute ago, odd ones without own.json, due in an hour.
func makeOthers(b *testing.B, raw bucket.Bucket, other *fence.Node, m int) {
	b.Helper()
	ctx := b.Context()
	nsID := frames.NamespaceID("", scaleNS)
	now := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make([]error, m)
	for i := range m {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			actor := frames.Actor{Namespace: nsID, Actor: frames.ActorKey(fmt.Appendf(nil, "other-%d", i))}
			due := now.Add(time.Hour)
			if i%2 == 0 {
				if _, err := other.Claim(ctx, actor, fence.ClaimOptions{}); err != nil {
					errs[i] = err
					return
				}
				due = now.Add(-time.Minute)
			}
			_, errs[i] = raw.Put(ctx, actor.AlarmKey(uint64(due.UnixMilli()), 1), bytes.NewReader(nil), 0, bucket.Condition{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(b, err, "other actor %d", i)
	}
}
