package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/workers"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// restoreCmd parses the flags of framebench restore and runs restoreBench.
func restoreCmd(ctx context.Context, fs *flag.FlagSet, args []string) error {
	url := fs.String("bucket", "", "bucket URL (default: a temporary directory bucket)")
	size := fs.String("size", "1GiB", "database size")
	rounds := fs.Int("rounds", 3, "alternating rounds of each measurement")
	par := fs.Int("parallelism", 0, "restore.Options.Parallelism (0: the default)")
	inflight := fs.String("inflight", "0", "restore.Options.MaxInflightBytes (0: the default)")
	profile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	fs.Parse(args)
	n, err := parseSize(*size)
	if err != nil {
		return err
	}
	var inflightBytes int64
	if *inflight != "0" {
		if inflightBytes, err = parseSize(*inflight); err != nil {
			return err
		}
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return restoreBench(ctx, *url, n, *rounds, restore.Options{Parallelism: *par, MaxInflightBytes: inflightBytes})
}

// restoreBench: framebench restore -bucket URL [-size 1GiB] [-rounds 3]
// [-parallelism N] [-inflight BYTES] [-cpuprofile FILE]
//
// It builds a database of about size bytes, replicates it through session.Open
// (which uploads it as the session's first snapshot), then rewrites all of
// it in transactions, so that the session holds a snapshot and a log each
// about the database's size: the state compaction leaves for a restore to
// read at worst. Then, in alternating rounds, it measures side by side:
//
//   - the limit: GET and decode of the same objects (gunzip, or zstd for
//     chunk files), one object at a time, and with the parallelism
//     restore uses (the snapshot alongside the batches);
//   - restore.Restore of the actor, as MB/s of database restored (database
//     bytes / restore time), with integrity_check and without it (to show
//     what it costs apart);
//
// and prints medians and the ratio of restore to the limit.
func restoreBench(ctx context.Context, url string, size int64, rounds int, opts restore.Options) error {
	b, cleanup, err := openBucket(ctx, url)
	if err != nil {
		return err
	}
	defer cleanup()
	dir, done, err := workDir()
	if err != nil {
		return err
	}
	defer done()
	fmt.Printf("restore against %s: building a %s database with a log of about its size...\n", b, mib(size))
	fx, err := buildRestoreFixture(ctx, b, dir, size)
	if err != nil {
		return err
	}
	fmt.Printf("database %s in %d pages; bucket: snapshot %s + %d batches %s (compressed); built in %v\n",
		mib(fx.dbBytes), fx.dbBytes/4096, mib(fx.snapshotBytes), len(fx.batches), mib(fx.logBytes), fx.buildTime.Round(time.Second))

	var seq, par, full, noIC []time.Duration
	var ratio, ratioNoIC []float64 // restore / parallel limit, in rate, per round
	for round := range rounds {
		d, err := fx.limit(ctx, 1)
		if err != nil {
			return err
		}
		seq = append(seq, d)
		if d, err = fx.limit(ctx, restoreParallelism(opts)); err != nil {
			return err
		}
		par = append(par, d)
		if d, err = fx.restore(ctx, opts); err != nil {
			return err
		}
		full = append(full, d)
		o := opts
		o.SkipIntegrityCheck = true
		if d, err = fx.restore(ctx, o); err != nil {
			return err
		}
		noIC = append(noIC, d)
		ratio = append(ratio, par[round].Seconds()/full[round].Seconds())
		ratioNoIC = append(ratioNoIC, par[round].Seconds()/noIC[round].Seconds())
		fmt.Printf("round %d: GET+decode sequential %v, parallel %v; restore %v (%.0f%% of parallel), without integrity_check %v (%.0f%%)\n",
			round+1, seq[round].Round(time.Millisecond), par[round].Round(time.Millisecond),
			full[round].Round(time.Millisecond), 100*ratio[round], noIC[round].Round(time.Millisecond), 100*ratioNoIC[round])
	}
	rate := func(d time.Duration) float64 { return float64(fx.dbBytes) / (1 << 20) / d.Seconds() }
	ms, mp, mf, mn := medianDuration(seq), medianDuration(par), medianDuration(full), medianDuration(noIC)
	fmt.Printf("\nmedians of %d rounds; MiB/s of database (%s) over the median time\n", rounds, mib(fx.dbBytes))
	fmt.Printf("| measurement | MiB/s | time |\n|---|---|---|\n")
	fmt.Printf("| limit: GET + decode, one object at a time | %.1f | %v |\n", rate(ms), ms.Round(time.Millisecond))
	fmt.Printf("| limit: GET + decode, %d at a time | %.1f | %v |\n", restoreParallelism(opts), rate(mp), mp.Round(time.Millisecond))
	fmt.Printf("| restore (full verification, integrity_check) | %.1f | %v |\n", rate(mf), mf.Round(time.Millisecond))
	fmt.Printf("| restore without integrity_check | %.1f | %v |\n", rate(mn), mn.Round(time.Millisecond))
	fmt.Printf("\nrestore's rate over the limit's, of the median times: %.0f%% of sequential, %.0f%% of parallel (without integrity_check: %.0f%%, %.0f%%)\n",
		100*ms.Seconds()/mf.Seconds(), 100*mp.Seconds()/mf.Seconds(), 100*ms.Seconds()/mn.Seconds(), 100*mp.Seconds()/mn.Seconds())
	fmt.Printf("restore's rate over the parallel limit's, the median of the rounds' ratios: %.0f%% (without integrity_check %.0f%%)\n",
		100*median(ratio), 100*median(ratioNoIC))

	// Compaction's measurement of the same fixture is added here: it can
	// reuse fx (the bucket, the actor, the session's objects and the
	// database size) and print beside the numbers above.
	for _, m := range fixtureMeasures {
		if err := m(ctx, fx); err != nil {
			return err
		}
	}
	return nil
}

// fixtureMeasures are further measurements of the restore fixture, run
// after the restore numbers are printed (compaction registers its own from
// an init function in its file).
var fixtureMeasures []func(ctx context.Context, fx *restoreFixture) error

func restoreParallelism(o restore.Options) int {
	if o.Parallelism > 0 {
		return o.Parallelism
	}
	return restore.DefaultParallelism
}

// restoreFixture is one actor in a bucket: a session of a snapshot and a
// log each about the database's size.
type restoreFixture struct {
	b             bucket.Bucket
	actor         frames.Actor
	dir           string // scratch for restores
	dbBytes       int64
	snapshot      bucket.Info
	chunks        []bucket.Info // the snapshot's, when it is a manifest
	batches       []bucket.Info
	snapshotBytes int64 // the snapshot and its chunks
	logBytes      int64
	buildTime     time.Duration
}

// buildRestoreFixture writes the database with the plain os VFS (fast, and
// not captured: the session's first snapshot carries it), opens it
// replicated, and rewrites every row in transactions of about 1% of the
// database.
func buildRestoreFixture(ctx context.Context, b bucket.Bucket, dir string, size int64) (*restoreFixture, error) {
	start := time.Now()
	dbDir := filepath.Join(dir, "db")
	if err := os.MkdirAll(dbDir, 0o755); err != nil {
		return nil, err
	}
	c, err := plain(filepath.Join(dbDir, "db.sqlite"))
	if err != nil {
		return nil, err
	}
	// Rows of 1 KiB of hex text: compressible about as much as typical
	// data (gzip to ~55%), unlike randomblob. Three fit a 4 KiB page.
	const rowBytes = 1024
	rows := size / (4096 / 3)
	perTx := max(1, rows/100)
	err = c.Exec("PRAGMA page_size=4096; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	for done := int64(0); err == nil && done < rows; done += perTx {
		err = c.Exec(fmt.Sprintf("INSERT INTO t(v) SELECT hex(randomblob(%d)) FROM generate_series(1,%d)", rowBytes/2, min(perTx, rows-done)))
	}
	if err == nil {
		err = c.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	}
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("building the database: %w", err)
	}

	id := make([]byte, 8)
	rand.Read(id)
	// No background compaction: the fixture is the worst case a restore
	// reads (a snapshot and a log of the database's size), kept as built.
	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: "bench-restore", Actor: id, Epoch: 1, Dir: dbDir, DisableCompaction: true})
	if err != nil {
		return nil, err
	}
	rc, err := db.Conn()
	if err == nil {
		for lo := int64(1); err == nil && lo <= rows; lo += perTx {
			err = rc.Exec(fmt.Sprintf("UPDATE t SET v = hex(randomblob(%d)) WHERE id BETWEEN %d AND %d", rowBytes/2, lo, lo+perTx-1))
		}
		if err == nil {
			err = rc.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		}
		rc.Close()
	}
	if err == nil {
		err = db.Durable(ctx)
	}
	if cerr := db.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("rewriting the database: %w", err)
	}
	fi, err := os.Stat(db.Path())
	if err != nil {
		return nil, err
	}
	fx := &restoreFixture{b: b, actor: frames.Actor{Namespace: frames.NamespaceID("", "bench-restore"), Actor: frames.ActorKey(id)},
		dir: dir, dbBytes: fi.Size(), buildTime: time.Since(start)}
	for o, err := range bucket.All(ctx, b, fx.actor.Prefix()) {
		if err != nil {
			return nil, err
		}
		switch {
		case strings.Contains(o.Key, "/snapshot/"):
			fx.snapshot = o
			fx.snapshotBytes += o.Size
		case strings.Contains(o.Key, "/chunk/"):
			fx.chunks = append(fx.chunks, o)
			fx.snapshotBytes += o.Size
		case strings.Contains(o.Key, "/log/"):
			fx.batches = append(fx.batches, o)
			fx.logBytes += o.Size
		}
	}
	if fx.snapshot.Key == "" {
		return nil, errors.New("the session has no snapshot")
	}
	// The database the restore must rebuild is the local file (checked
	// against every restore below).
	return fx, os.Rename(db.Path(), filepath.Join(dir, "want.db"))
}

// limit GETs and decodes the fixture's objects, n at a time, the snapshot
// (and its chunks) first: each object in its own format, as a restore
// reads it (a chunk file with frames.ReadChunkSealed, the rest gunzipped
// to io.Discard), without anything a restore does with what it decodes.
func (fx *restoreFixture) limit(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	objs := append(append([]bucket.Info{fx.snapshot}, fx.chunks...), fx.batches...)
	// Each worker reuses its gzip reader and chunk buffer.
	type decoder struct {
		zr  gzip.Reader
		buf []byte
	}
	err := workers.Run(ctx, objs, n, func(ctx context.Context, d *decoder, o bucket.Info) error {
		return getDecode(ctx, fx.b, o.Key, &d.zr, &d.buf)
	})
	if err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// getDecode GETs key and decodes it: a chunk file into *buf (kept for the
// next), anything else gunzipped to io.Discard.
func getDecode(ctx context.Context, b bucket.Bucket, key string, zr *gzip.Reader, buf *[]byte) error {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	if k, err := frames.ParseKey(key); err == nil && k.Kind == frames.KeyChunk {
		_, content, err := frames.ReadChunkSealed(rc, key, 0, *buf, frames.Limits{})
		*buf = content[:0]
		return err
	}
	if err := zr.Reset(rc); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// restore restores the fixture and checks the result against the
// database. It prints how long each phase took.
func (fx *restoreFixture) restore(ctx context.Context, opts restore.Options) (time.Duration, error) {
	dest := filepath.Join(fx.dir, "restored.db")
	os.Remove(dest)
	var (
		phases []string
		last   restore.Phase
		at     time.Time
	)
	opts.Progress = func(p restore.Progress) {
		if p.Phase == last {
			return
		}
		now := time.Now()
		if last != "" {
			phases = append(phases, fmt.Sprintf("%s %v", last, now.Sub(at).Round(10*time.Millisecond)))
		}
		last, at = p.Phase, now
	}
	start := time.Now()
	res, err := restore.Restore(ctx, fx.b, fx.actor, dest, opts)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	fmt.Printf("  restore phases: %s\n", strings.Join(phases, ", "))
	if res.Bytes != fx.dbBytes {
		return 0, fmt.Errorf("restored %d bytes, the database has %d", res.Bytes, fx.dbBytes)
	}
	same, err := sameFiles(dest, filepath.Join(fx.dir, "want.db"))
	if err != nil {
		return 0, err
	}
	if !same {
		return 0, errors.New("the restored database differs from the original")
	}
	return d, os.Remove(dest)
}

func sameFiles(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, erra := io.ReadFull(fa, ba)
		nb, errb := io.ReadFull(fb, bb)
		if na != nb || string(ba[:na]) != string(bb[:nb]) {
			return false, nil
		}
		if erra != nil || errb != nil {
			if (erra == io.EOF || erra == io.ErrUnexpectedEOF) && (errb == io.EOF || errb == io.ErrUnexpectedEOF) {
				return true, nil
			}
			return false, errors.Join(erra, errb)
		}
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// parseSize parses "1GiB", "512MiB", "100MB", "4096".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("size %q: want a number and a unit such as 1GiB or 256MiB", s)
			}
			return int64(v * float64(u.mult)), nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("size %q: want a number and a unit such as 1GiB or 256MiB", s)
	}
	return v, nil
}
