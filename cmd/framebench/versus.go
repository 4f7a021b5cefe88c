package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
)

// framebench versus: framectl side by side with Litestream on the same S3
// server, through the same counting proxy, on the same database and
// workload, in alternating rounds of one run.
//
// Phases (-phases, default all three):
//
//   - rate: commits/s as fast as one connection can go, at each
//     synchronous setting, for each side and for the database without
//     replication measured just before and just after it (the ratio is to
//     the mean of those two: the machine is shared and drifts). Its table
//     gives the median of each side's rates and, beside it, the median of
//     its per-round ratios, which is not the ratio of the median rates.
//   - cost: -commit-rate commits/s (default 100) for -cost-time, at each
//     -cost-sync: PUTs, GETs, listings, deletes and bytes per 1,000
//     commits as the proxy counts them from the moment the side is
//     replicating until the bucket holds the last commit; lag p50/p99/max
//     (from a commit's return to the moment the server acknowledged the
//     first object write holding it; see side.covers); the bytes the
//     side's prefix holds, sampled every second (storage amplification).
//     A table row per round as it is measured, then the medians, a cell
//     per -cost-sync setting.
//   - restore: versus_restore.go.
//
// Both phases also report CPU time per commit (cpu.go): wall-clock rates
// on a shared machine swing with its load, CPU per commit much less.
//
// Lag is observed at the proxy for both: the time the server's 200 for an
// object write passed through it. What "holds the commit" means differs by
// format and is read from what each writes: framectl's batch key names its
// last sequence number; Litestream's L0 file header carries the time it
// read the WAL (ltxTimestamp), in milliseconds.
func versusCmd(ctx context.Context, fs *flag.FlagSet, args []string) error {
	o := versusOpts{}
	url := fs.String("bucket", os.Getenv("FRAMECTL_TEST_S3"), "the S3 server, an s3://BUCKET/?endpoint=HOST:PORT&insecure=1 URL (default $FRAMECTL_TEST_S3)")
	phases := fs.String("phases", "rate,cost,restore", "which measurements: rate, cost, restore")
	fs.IntVar(&o.rounds, "rounds", 3, "alternating rounds")
	fs.DurationVar(&o.rateTime, "rate-time", 3*time.Second, "length of a rate measurement")
	fs.DurationVar(&o.costTime, "cost-time", 30*time.Second, "length of a cost measurement")
	fs.Float64Var(&o.commitRate, "commit-rate", 100, "commits/s of a cost measurement (0: as fast as one connection can)")
	syncs := fs.String("sync", "NORMAL,FULL", "synchronous settings of the rate phase")
	costSyncs := fs.String("cost-sync", "NORMAL", "synchronous settings of the cost phase")
	fc := fs.String("framectl", "default", "framectl variants, separated by ';': 'default' or settings "+
		"interval=DURATION|off (UploadInterval), minlog=SIZE|off, mininterval=DURATION|off (compact.Rule), compaction=off, "+
		"retention=DURATION (Retention), kept=SIZE|off (KeptBytes), "+
		"bucket=dir (a directory bucket instead of the S3 server: no requests counted, PUTs from session.Stats)")
	ls := fs.String("litestream", "default,100ms", "Litestream variants: 'default' (its 1 s intervals) or a DURATION for monitor-interval and sync-interval; empty: none")
	fs.IntVar(&o.work.rows, "rows", 10000, "rows of the hot database")
	fs.IntVar(&o.work.rowBytes, "row-bytes", 100, "random bytes per row")
	restoreSize := fs.String("size", "1GiB", "database size of the restore fixtures")
	fs.IntVar(&o.restoreRounds, "restore-rounds", 3, "alternating restore rounds per fixture")
	fixtures := fs.String("fixtures", "incompressible,compressible", "restore fixtures")
	fs.Parse(args)
	o.work.seed = 1
	var err error
	if o.restoreBytes, err = parseSize(*restoreSize); err != nil {
		return err
	}
	o.phases = strings.Split(*phases, ",")
	o.syncs = strings.Split(*syncs, ",")
	o.costSyncs = strings.Split(*costSyncs, ",")
	o.fixtures = strings.Split(*fixtures, ",")
	if o.framectl, err = parseFramectlVariants(*fc); err != nil {
		return err
	}
	if *ls != "" {
		for _, v := range strings.Split(*ls, ",") {
			var d time.Duration
			if v != "default" {
				if d, err = time.ParseDuration(v); err != nil || d <= 0 {
					return fmt.Errorf("-litestream %q: want 'default' or a positive duration", v)
				}
			}
			o.litestream = append(o.litestream, d)
		}
	}
	return versus(ctx, *url, o)
}

type versusOpts struct {
	phases, syncs, fixtures []string
	rounds                  int
	rateTime, costTime      time.Duration
	commitRate              float64
	costSyncs               []string
	framectl                []*framectlSide
	litestream              []time.Duration
	work                    hotWorkload
	restoreBytes            int64
	restoreRounds           int
}

func (o versusOpts) phase(p string) bool { return slices.Contains(o.phases, p) }

// parseFramectlVariants parses -framectl.
func parseFramectlVariants(spec string) ([]*framectlSide, error) {
	var out []*framectlSide
	for _, v := range strings.Split(spec, ";") {
		v = strings.TrimSpace(v)
		s := &framectlSide{label: v}
		if v == "default" {
			out = append(out, s)
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "interval":
				s.interval, err = durationOrOff(val)
			case "mininterval":
				s.rule.MinInterval, err = durationOrOff(val)
			case "minlog":
				if val == "off" {
					s.rule.MinLogBytes = -1
				} else {
					s.rule.MinLogBytes, err = parseSize(val)
				}
			case "compaction":
				s.noCompact = val == "off"
			case "retention":
				s.retention, err = time.ParseDuration(val)
			case "kept":
				if val == "off" {
					s.kept = -1
				} else {
					s.kept, err = parseSize(val)
				}
			case "bucket":
				s.dirBucket = val == "dir"
			default:
				err = errors.New("unknown setting")
			}
			if err != nil {
				return nil, fmt.Errorf("-framectl %q: %q: %v", v, kv, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func durationOrOff(s string) (time.Duration, error) {
	if s == "off" {
		return -1, nil
	}
	return time.ParseDuration(s)
}

// versusEnv is what every side of a run shares.
type versusEnv struct {
	proxy      *countingProxy
	bucketName string
	direct     bucket.Bucket // the server without the proxy: footprints are not counted
	litestream string        // binary
	fixture    string        // the hot database every side starts from
	dbBytes    int64
	work       dirs
}

type dirs struct{ root string }

func (d dirs) next(name string) (string, error) {
	dir := filepath.Join(d.root, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// quiet waits until the proxy has seen no request for 300 ms (at most
// 10 s): what a side does as it starts (its first snapshot, a first
// compaction pass) is not counted as the workload's.
func (e *versusEnv) quiet() {
	last, still := e.proxy.Counts(), 0
	for deadline := time.Now().Add(10 * time.Second); still < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if c := e.proxy.Counts(); c == last {
			still++
		} else {
			last, still = c, 0
		}
	}
}

// footprint samples the bytes under prefix in b every second until stop
// is called, and returns the mean and the largest sample.
func footprint(ctx context.Context, b bucket.Bucket, prefix string) (stop func() (mean, most int64)) {
	var mu sync.Mutex
	var samples []int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			var n int64
			for o, err := range bucket.All(ctx, b, prefix) {
				if err != nil {
					break
				}
				n += o.Size
			}
			mu.Lock()
			samples = append(samples, n)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		wg.Wait()
		var sum, most int64
		for _, s := range samples {
			sum += s
			most = max(most, s)
		}
		return sum / int64(max(len(samples), 1)), most
	}
}

func versus(ctx context.Context, url string, o versusOpts) error {
	endpoint, bucketName, err := s3Endpoint(url)
	if err != nil {
		return err
	}
	direct, err := bucket.Open(ctx, url)
	if err != nil {
		return err
	}
	env := &versusEnv{bucketName: bucketName, direct: direct}
	if len(o.litestream) > 0 {
		if env.litestream, err = litestreamBinary(ctx); err != nil {
			return err
		}
	}
	// 128 bytes of each object written: Litestream's LTX header.
	if env.proxy, err = startProxy(endpoint, 128); err != nil {
		return err
	}
	defer env.proxy.Close()
	root, cleanup, err := workDir()
	if err != nil {
		return err
	}
	defer cleanup()
	env.work = dirs{root}
	env.fixture = filepath.Join(root, "hot.db")
	if env.dbBytes, err = o.work.build(env.fixture); err != nil {
		return err
	}
	run := time.Now().Format("150405")
	fmt.Printf("framebench versus: %s through a counting proxy at %s; litestream %s\n", url, env.proxy.Addr(), env.litestream)
	fmt.Printf("hot database: %d rows of %d random bytes, %s (%d bytes); each commit rewrites one row chosen at random (the same rows in every side of a round)\n",
		o.work.rows, o.work.rowBytes, mib(env.dbBytes), env.dbBytes)

	var sides []side
	for _, f := range o.framectl {
		sides = append(sides, f)
	}
	for _, d := range o.litestream {
		sides = append(sides, &litestreamSide{interval: d})
	}
	if o.phase("rate") {
		if err := versusRate(ctx, env, o, sides, run); err != nil {
			return err
		}
	}
	if o.phase("cost") {
		if err := versusCost(ctx, env, o, sides, run); err != nil {
			return err
		}
	}
	if o.phase("restore") {
		if err := versusRestore(ctx, env, o, run); err != nil {
			return err
		}
	}
	return nil
}

// rotate returns sides starting at the round's index, so that no side
// always runs first.
func rotate[T any](xs []T, round int) []T {
	if len(xs) == 0 {
		return xs
	}
	k := round % len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

// runSide starts s, runs body on its connection and stops it.
func runSide(ctx context.Context, env *versusEnv, s side, name, prefix, sync string, body func(c *sqlite3.Conn) error) error {
	dir, err := env.work.next(name)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := s.start(ctx, env, dir, prefix)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name(), err)
	}
	err = c.Exec("PRAGMA synchronous=" + sync)
	if err == nil {
		err = body(c)
	}
	if serr := s.stop(ctx, c); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.name(), err)
	}
	return nil
}

// versusRate: commits/s flat out, each side between two measurements of
// the database without replication.
func versusRate(ctx context.Context, env *versusEnv, o versusOpts, sides []side, run string) error {
	fmt.Printf("\n## rate: one connection flat out for %v per measurement, %d rounds\n", o.rateTime, o.rounds)
	fmt.Println("each round: commits/s without replication, then each side's commits/s with, in parentheses, its ratio to the mean of the runs without replication just before and just after it")
	type key struct{ sync, side string }
	rates, ratios := map[key][]float64{}, map[key][]float64{}
	n := 0
	notes := map[key][]string{}
	cpus := map[key][]float64{} // CPU µs per commit
	measure := func(s side, sync string, round int) (float64, error) {
		n++
		var rate float64
		err := runSide(ctx, env, s, fmt.Sprintf("rate-%d", n), fmt.Sprintf("vs%s-rate-%d", run, n), sync, func(c *sqlite3.Conn) error {
			w, err := o.work.writer(c, round)
			if err != nil {
				return err
			}
			defer w.Close()
			cpu0, passes0 := selfCPU()+s.cpu(), s.compactions()
			k, d, err := w.flatOut(o.rateTime)
			rate = float64(k) / d.Seconds()
			cpus[key{sync, s.name()}] = append(cpus[key{sync, s.name()}], (selfCPU()+s.cpu()-cpu0).Seconds()*1e6/float64(k))
			if passes0 >= 0 {
				notes[key{sync, s.name()}] = append(notes[key{sync, s.name()}], fmt.Sprintf("%.2f", float64(s.compactions()-passes0)/d.Seconds()))
			}
			return err
		})
		return rate, err
	}
	for round := range o.rounds {
		for _, sync := range o.syncs {
			base, err := measure(none{}, sync, round)
			if err != nil {
				return err
			}
			line := fmt.Sprintf("round %d %-6s  none %.0f", round+1, sync, base)
			for _, s := range rotate(sides, round) {
				r, err := measure(s, sync, round)
				if err != nil {
					return err
				}
				after, err := measure(none{}, sync, round)
				if err != nil {
					return err
				}
				k := key{sync, s.name()}
				rates[k] = append(rates[k], r)
				ratios[k] = append(ratios[k], r/((base+after)/2))
				rates[key{sync, "none"}] = append(rates[key{sync, "none"}], base)
				line += fmt.Sprintf(" | %s %.0f (%.2f) | none %.0f", s.name(), r, r/((base+after)/2), after)
				base = after
			}
			fmt.Println(line)
		}
	}
	fmt.Printf("\nmedians of %d rounds, per synchronous setting. commits/s: the median of the side's rates. "+
		"÷ none: the median of the side's per-round ratios (its rate over the mean of the runs without replication either side of it), "+
		"not the ratio of the medians of commits/s beside it. CPU: of this process (workload, framectl, the proxy) and of litestream replicate, "+
		"per commit, the median of rounds. Compaction passes/s: each round's, in order.\n", o.rounds)
	fmt.Print("| side |")
	for _, sync := range o.syncs {
		fmt.Printf(" %[1]s commits/s | %[1]s ÷ none, median of the rounds' ratios | %[1]s CPU µs/commit |", sync)
	}
	fmt.Printf(" compaction passes/s |\n|---|%s---|\n", strings.Repeat("---|---|---|", len(o.syncs)))
	for _, s := range append([]side{none{}}, sides...) {
		fmt.Printf("| %s |", s.name())
		var passes []string
		for _, sync := range o.syncs {
			k := key{sync, s.name()}
			if _, ok := s.(none); ok {
				fmt.Printf(" %s | 1 | %.1f |", thousands(median(rates[key{sync, "none"}])), median(cpus[k]))
				continue
			}
			fmt.Printf(" %s | %.2f | %.1f |", thousands(median(rates[k])), median(ratios[k]), median(cpus[k]))
			if len(notes[k]) > 0 {
				passes = append(passes, strings.Join(notes[k], ", "))
			}
		}
		fmt.Printf(" %s |\n", strings.Join(passes, " / "))
	}
	return nil
}

// costRow is one cost measurement of one side.
type costRow struct {
	commits          int
	seconds          float64
	counts           requestCounts
	lag50, lag99, mx time.Duration
	unheld           int // commits no object write was seen to hold
	mean, most       int64
	cpu              time.Duration // of the workload and the drain
	passes           int64         // compaction passes, or -1 (a side that does not compact in this process)
	note             string
}

func (r costRow) per1000(n int64) float64 { return 1000 * float64(n) / float64(r.commits) }

// costColumns are the columns of the cost tables, each round's and the
// medians': a header and the value of a row (per 1,000 commits unless the
// header says otherwise). proxy: counted at the proxy, so "–" for a side
// whose requests do not pass through it.
var costColumns = []struct {
	header string
	proxy  bool
	format func(float64) string
	value  func(r costRow, dbBytes int64) float64
}{
	{"commits/s", false, thousands, func(r costRow, _ int64) float64 { return float64(r.commits) / r.seconds }},
	{"CPU µs/commit", false, thousands, func(r costRow, _ int64) float64 { return r.cpu.Seconds() * 1e6 / float64(r.commits) }},
	{"PUTs", true, oneDecimal, func(r costRow, _ int64) float64 { return r.per1000(r.counts.PUT) }},
	{"GETs+HEADs", true, oneDecimal, func(r costRow, _ int64) float64 { return r.per1000(r.counts.GET + r.counts.HEAD) }},
	{"LISTs", true, oneDecimal, func(r costRow, _ int64) float64 { return r.per1000(r.counts.LIST) }},
	{"DELETEs+POSTs", true, oneDecimal, func(r costRow, _ int64) float64 { return r.per1000(r.counts.DELETE + r.counts.POST) }},
	{"bytes up/commit", true, thousands, func(r costRow, _ int64) float64 { return float64(r.counts.BytesUp) / float64(r.commits) }},
	{"bytes down/commit", true, thousands, func(r costRow, _ int64) float64 { return float64(r.counts.BytesDown) / float64(r.commits) }},
	{"lag p50", true, millis, func(r costRow, _ int64) float64 { return r.lag50.Seconds() * 1000 }},
	{"lag p99", true, millis, func(r costRow, _ int64) float64 { return r.lag99.Seconds() * 1000 }},
	{"stored mean", false, times, func(r costRow, db int64) float64 { return float64(r.mean) / float64(db) }},
	{"stored max", false, times, func(r costRow, db int64) float64 { return float64(r.most) / float64(db) }},
}

func oneDecimal(x float64) string { return fmt.Sprintf("%.1f", x) }
func millis(x float64) string     { return fmt.Sprintf("%.1f ms", x) }
func times(x float64) string      { return fmt.Sprintf("%.2f×", x) }

// versusCost: the workload at -commit-rate, counted, at each -cost-sync:
// a table of each round as it is measured, then one of the medians.
func versusCost(ctx context.Context, env *versusEnv, o versusOpts, sides []side, run string) error {
	rate := fmt.Sprintf("%.0f commits/s", o.commitRate)
	if o.commitRate <= 0 {
		rate = "commits as fast as one connection can"
	}
	fmt.Printf("\n## cost: %s for %v at synchronous=%s, %d rounds; per 1,000 commits unless noted; stored = bytes under the side's prefix, sampled each second, as a multiple of the database (%s)\n",
		rate, o.costTime, strings.Join(o.costSyncs, ","), o.rounds, mib(env.dbBytes))
	fmt.Print("| synchronous | round | side | commits |")
	for _, c := range costColumns {
		fmt.Printf(" %s |", c.header)
	}
	fmt.Printf(" lag max | compaction passes/s | notes |\n|---|---|---|---|%s---|---|---|\n", strings.Repeat("---|", len(costColumns)))
	rows := map[string][][]costRow{} // side -> per sync -> rounds
	for _, sync := range o.costSyncs {
		got, err := versusCostAt(ctx, env, o, sides, run+"-"+strings.ToLower(sync), sync)
		if err != nil {
			return err
		}
		for _, s := range sides {
			rows[s.name()] = append(rows[s.name()], got[s.name()])
		}
	}
	fmt.Printf("\nmedians of %d rounds; each cell one value per synchronous setting, %s; compaction passes/s: each round's, in order\n",
		o.rounds, strings.Join(o.costSyncs, " / "))
	fmt.Print("| side |")
	for _, c := range costColumns {
		fmt.Printf(" %s |", c.header)
	}
	fmt.Printf(" compaction passes/s |\n|---|%s---|\n", strings.Repeat("---|", len(costColumns)))
	for _, s := range sides {
		fmt.Printf("| %s |", s.name())
		for _, c := range costColumns {
			cells := make([]string, len(o.costSyncs))
			for i, rs := range rows[s.name()] {
				if c.proxy && !s.counted() {
					cells[i] = "–"
					continue
				}
				xs := make([]float64, len(rs))
				for j, r := range rs {
					xs[j] = c.value(r, env.dbBytes)
				}
				cells[i] = c.format(median(xs))
			}
			fmt.Printf(" %s |", strings.Join(cells, " / "))
		}
		var passes []string
		for _, rs := range rows[s.name()] {
			var each []string
			for _, r := range rs {
				if r.passes >= 0 {
					each = append(each, fmt.Sprintf("%.2f", float64(r.passes)/r.seconds))
				}
			}
			if len(each) > 0 {
				passes = append(passes, strings.Join(each, ", "))
			}
		}
		fmt.Printf(" %s |\n", strings.Join(passes, " / "))
	}
	return nil
}

// versusCostAt measures every side o.rounds times at one synchronous
// setting, printing each measurement as a row of the rounds' table.
func versusCostAt(ctx context.Context, env *versusEnv, o versusOpts, sides []side, run, sync string) (map[string][]costRow, error) {
	rows := map[string][]costRow{}
	n := 0
	for round := range o.rounds {
		for _, s := range rotate(sides, round) {
			n++
			prefix := fmt.Sprintf("vs%s-cost-%d", run, n)
			var row costRow
			err := runSide(ctx, env, s, fmt.Sprintf("cost-%d", n), prefix, sync, func(c *sqlite3.Conn) error {
				w, err := o.work.writer(c, round)
				if err != nil {
					return err
				}
				defer w.Close()
				c0, l0 := env.proxy.Counts(), env.proxy.NumLanded()
				fb, fp := s.stored(env, prefix)
				stopFootprint := footprint(ctx, fb, fp)
				start, cpu0, passes0 := time.Now(), selfCPU()+s.cpu(), s.compactions()
				marks, err := w.paced(o.commitRate, o.costTime, s.seq)
				row.seconds = time.Since(start).Seconds()
				if err == nil && len(marks) > 0 {
					err = s.drain(ctx, env, marks[len(marks)-1])
				}
				row.mean, row.most = stopFootprint()
				if err != nil {
					return err
				}
				row.commits, row.counts = len(marks), env.proxy.Counts().sub(c0)
				row.cpu = selfCPU() + s.cpu() - cpu0
				row.passes = -1
				if passes0 >= 0 {
					row.passes = s.compactions() - passes0
				}
				lags, unheld := commitLags(marks, env.proxy.Landed(l0), s.covers)
				row.unheld = unheld
				row.lag50, row.lag99, row.mx = quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1)
				row.note = s.note(row.seconds)
				return nil
			})
			if err != nil {
				return nil, err
			}
			rows[s.name()] = append(rows[s.name()], row)
			fmt.Printf("| %s | %d | %s | %d |", sync, round+1, s.name(), row.commits)
			for _, c := range costColumns {
				switch {
				case c.proxy && !s.counted():
					fmt.Print(" – |")
				case c.header == "stored mean" || c.header == "stored max":
					b := row.mean
					if c.header == "stored max" {
						b = row.most
					}
					fmt.Printf(" %s, %s |", mib(b), c.format(c.value(row, env.dbBytes)))
				default:
					fmt.Printf(" %s |", c.format(c.value(row, env.dbBytes)))
				}
			}
			lagMax, passes := "–", "–"
			if s.counted() {
				lagMax = row.mx.Round(100 * time.Microsecond).String()
			}
			if row.passes >= 0 {
				passes = fmt.Sprintf("%.2f", float64(row.passes)/row.seconds)
			}
			note := row.note
			if row.unheld > 0 && s.counted() {
				note = strings.TrimPrefix(note+fmt.Sprintf("; %d commits were never seen in an object write", row.unheld), "; ")
			}
			fmt.Printf(" %s | %s | %s |\n", lagMax, passes, note)
		}
	}
	return rows, nil
}

// commitLags returns, for each commit, the time from its return to the
// first object write landing after it that holds it (landings in the order
// they landed). Holding is monotone, so one pass over both suffices: a
// write that holds a commit holds every earlier one.
func commitLags(marks []commitMark, ls []landing, covers func(landing, commitMark) bool) ([]time.Duration, int) {
	var out []time.Duration
	j := 0
	for i, c := range marks {
		for j < len(ls) && (ls[j].at.Before(c.at) || !covers(ls[j], c)) {
			j++
		}
		if j == len(ls) {
			return out, len(marks) - i
		}
		out = append(out, ls[j].at.Sub(c.at))
	}
	return out, 0
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
