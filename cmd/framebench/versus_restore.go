package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/internal/fixture"
	"github.com/framectl/framectl/session"
)

// The restore phase of framebench versus: the same database replicated by
// framectl (session.Open uploads it as the session's first snapshot) and by
// Litestream (its first L0 file and its snapshot), both through the proxy
// to the same server; then alternating rounds of `framectl restore` and
// `litestream restore` of it, each a separate process, timed from start
// to exit, and each result compared byte for byte with the database.
//
// framectl restore always runs PRAGMA integrity_check; litestream restore
// does not by default (-integrity-check none), so it runs both ways.
//
// Fixtures: package internal/fixture's two kinds, incompressible rows and
// compressible hex text (DEFLATE takes the latter to about 40%).

func versusRestore(ctx context.Context, env *versusEnv, o versusOpts, run string) error {
	if env.litestream == "" {
		return errors.New("the restore phase compares with Litestream: give -litestream")
	}
	fmt.Printf("\n## restore: %s databases, %d alternating rounds\n", mib(o.restoreBytes), o.restoreRounds)
	fc, err := framectlBinary(ctx, env.work.root)
	if err != nil {
		return err
	}
	var results []restoreTimes
	for _, kind := range o.fixtures {
		r, err := versusRestoreFixture(ctx, env, o, run, kind, fc)
		if err != nil {
			return fmt.Errorf("restore fixture %s: %w", kind, err)
		}
		results = append(results, r)
	}
	printRestoreTable(results, o.restoreRounds)
	return nil
}

// The ways a fixture is restored, in the order of the table's columns.
const (
	fcRestore        = "framectl restore"
	fcRestoreOneCore = "framectl restore, GOMAXPROCS=1"
	lsRestore        = "litestream restore"
	lsRestoreChecked = "litestream restore -integrity-check full"
)

var restoreWays = []string{fcRestore, fcRestoreOneCore, lsRestore, lsRestoreChecked}

// restoreTimes is one fixture's restore times in seconds, by way, one per
// round in the order of the rounds.
type restoreTimes struct {
	kind  string
	bytes int64
	times map[string][]float64
}

// printRestoreTable prints one row per fixture: each way's median time and
// the MB/s it gives, then framectl's speed over Litestream's, which is
// Litestream's time over framectl's: of the median times, then of each
// round's times (the same round's two restores), then of the median times
// against Litestream with its integrity check.
func printRestoreTable(rs []restoreTimes, rounds int) {
	fmt.Printf("\nmedians of %d alternating rounds; MB/s are 10^6 bytes of database per second; "+
		"framectl ÷ litestream is framectl's speed over Litestream's (Litestream's time over framectl's)\n", rounds)
	fmt.Print("| fixture |")
	for _, w := range restoreWays {
		fmt.Printf(" %s |", w)
	}
	fmt.Print(" framectl ÷ litestream, of the medians | framectl ÷ litestream, each round | framectl ÷ litestream -integrity-check full, of the medians |\n")
	fmt.Printf("|---|%s---|---|---|\n", strings.Repeat("---|", len(restoreWays)))
	for _, r := range rs {
		fmt.Printf("| %s, %s MB |", r.kind, thousands(float64(r.bytes)/1e6))
		for _, w := range restoreWays {
			t := median(r.times[w])
			fmt.Printf(" %.2f s, %.0f MB/s |", t, float64(r.bytes)/1e6/t)
		}
		fc, ls := r.times[fcRestore], r.times[lsRestore]
		each := make([]string, len(fc))
		for i := range fc {
			each[i] = fmt.Sprintf("%.2f", ls[i]/fc[i])
		}
		fmt.Printf(" %.1f× | %s | %.1f× |\n", median(ls)/median(fc), strings.Join(each, ", "), median(r.times[lsRestoreChecked])/median(fc))
	}
}

// thousands formats x rounded to an integer with commas between groups
// of three digits.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// framectlBinary builds cmd/framectl into dir (framebench runs from the
// module: go run ./cmd/framebench or a binary built there).
func framectlBinary(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "framectl")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/framectl/framectl/cmd/framectl")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build cmd/framectl (run framebench from the framectl module): %w", err)
	}
	return bin, nil
}

func versusRestoreFixture(ctx context.Context, env *versusEnv, o versusOpts, run, kind, fc string) (restoreTimes, error) {
	dir, err := env.work.next("restore-" + kind)
	if err != nil {
		return restoreTimes{}, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "source.db")
	start := time.Now()
	if err := fixture.Build(src, kind, o.restoreBytes); err != nil {
		return restoreTimes{}, err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return restoreTimes{}, err
	}
	size := fi.Size()
	fmt.Printf("\n%s: %s built in %v\n", kind, mib(size), time.Since(start).Round(time.Second))

	// framectl: the session's first snapshot.
	prefix := fmt.Sprintf("vs%s-restore-%s", run, kind)
	fcURL := fmt.Sprintf("s3://%s/%s-fc?endpoint=%s&insecure=1", env.bucketName, prefix, env.proxy.Addr())
	id := make([]byte, 8)
	rand.Read(id)
	c0 := env.proxy.Counts()
	start = time.Now()
	if err := framectlUpload(ctx, fcURL, id, src, filepath.Join(dir, "fc")); err != nil {
		return restoreTimes{}, fmt.Errorf("framectl upload: %w", err)
	}
	up := env.proxy.Counts().sub(c0)
	fmt.Printf("  framectl uploaded it in %v: %d PUTs, %s\n", time.Since(start).Round(time.Second), up.PUT, mib(up.BytesUp))

	// Litestream: its first L0 file and its snapshot, then stop.
	lsDir := filepath.Join(dir, "ls")
	ls := &litestreamSide{dir: lsDir}
	if err := copyFile(src, ls.dbFile()); err != nil {
		return restoreTimes{}, err
	}
	if err := ls.config(env, prefix+"-ls").write(ls.cfgFile()); err != nil {
		return restoreTimes{}, err
	}
	c0, start = env.proxy.Counts(), time.Now()
	if err := litestreamUpload(ctx, env, ls); err != nil {
		return restoreTimes{}, fmt.Errorf("litestream upload: %w", err)
	}
	up = env.proxy.Counts().sub(c0)
	fmt.Printf("  litestream uploaded it in %v: %d PUTs + %d POSTs, %s\n", time.Since(start).Round(time.Second), up.PUT, up.POST, mib(up.BytesUp))
	os.Remove(ls.dbFile()) // restore reads the bucket only; keep the config
	os.RemoveAll(filepath.Join(dir, "fc"))

	want, err := tableDigest(src)
	if err != nil {
		return restoreTimes{}, err
	}
	out := filepath.Join(dir, "restored.db")
	type way struct {
		name      string
		fileExact bool
		cmd       func() *exec.Cmd
		env       []string // added to the environment
	}
	fcRestoreCmd := func() *exec.Cmd {
		return exec.CommandContext(ctx, fc, "restore", "--bucket", fcURL, "--namespace", "versus-restore",
			"--actor", hex.EncodeToString(id), "--out", out)
	}
	ways := []way{
		{name: fcRestore, fileExact: true, cmd: fcRestoreCmd},
		// The same on one core: what parallel chunk fetching and
		// inflating buys.
		{name: fcRestoreOneCore, fileExact: true, cmd: fcRestoreCmd, env: []string{"GOMAXPROCS=1"}},
		{name: lsRestore, cmd: func() *exec.Cmd {
			return exec.CommandContext(ctx, env.litestream, "restore", "-config", ls.cfgFile(), "-o", out, ls.dbFile())
		}},
		{name: lsRestoreChecked, cmd: func() *exec.Cmd {
			return exec.CommandContext(ctx, env.litestream, "restore", "-config", ls.cfgFile(), "-integrity-check", "full", "-o", out, ls.dbFile())
		}},
	}
	times := map[string][]float64{}
	for round := range o.restoreRounds {
		for _, w := range rotate(ways, round) {
			os.Remove(out)
			cmd := w.cmd()
			cmd.Env = append(litestreamEnv(), w.env...)
			c0 := env.proxy.Counts()
			start := time.Now()
			outb, err := cmd.CombinedOutput()
			d := time.Since(start)
			if err != nil {
				return restoreTimes{}, fmt.Errorf("%s: %w: %s", w.name, err, outb)
			}
			counted := env.proxy.Counts().sub(c0)
			// framectl restores the file as it was; Litestream's copy also
			// holds the tables it adds to every database it replicates
			// (_litestream_seq, _litestream_lock), so its result is
			// compared by the rows of t.
			verdict := "identical file"
			if w.fileExact {
				same, err := sameFiles(out, src)
				if err != nil {
					return restoreTimes{}, err
				}
				if !same {
					return restoreTimes{}, fmt.Errorf("%s: the restored file differs from the database", w.name)
				}
			} else {
				got, err := tableDigest(out)
				if err != nil {
					return restoreTimes{}, fmt.Errorf("%s: reading the restored database: %w", w.name, err)
				}
				if got != want {
					return restoreTimes{}, fmt.Errorf("%s: the restored rows differ from the database's", w.name)
				}
				verdict = "identical rows"
			}
			times[w.name] = append(times[w.name], d.Seconds())
			fmt.Printf("  round %d %-42s %6.2f s  %6.1f MB/s  (%d GETs, %s down; %s)\n", round+1, w.name, d.Seconds(),
				float64(size)/1e6/d.Seconds(), counted.GET, mib(counted.BytesDown), verdict)
		}
	}
	os.Remove(out)
	return restoreTimes{kind: kind, bytes: size, times: times}, nil
}

// framectlUpload replicates the database src as a new actor's first
// snapshot and closes it.
func framectlUpload(ctx context.Context, url string, id []byte, src, dir string) error {
	if err := copyFile(src, filepath.Join(dir, "db.sqlite")); err != nil {
		return err
	}
	b, err := bucket.Open(ctx, url)
	if err != nil {
		return err
	}
	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: "versus-restore", Actor: id, Epoch: 1, Dir: dir, DisableCompaction: true})
	if err != nil {
		return err
	}
	return errors.Join(db.Durable(ctx), db.Close(ctx))
}

// litestreamUpload runs litestream replicate on the side's database until
// its first L0 file is in the bucket and the proxy has gone quiet (its
// snapshot follows), then stops it.
func litestreamUpload(ctx context.Context, env *versusEnv, s *litestreamSide) error {
	from := env.proxy.NumLanded()
	p, err := startLitestream(env.litestream, s.cfgFile(), s.logFile())
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := p.exited(); err != nil {
			return err
		}
		l0, snap := false, false
		for _, l := range env.proxy.Landed(from) {
			l0 = l0 || litestreamL0(l.key)
			snap = snap || litestreamSnapshot(l.key)
		}
		if l0 && snap {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return errors.New("litestream did not upload the database within 30 minutes")
		}
	}
	env.quiet()
	return p.stop()
}

// tableDigest hashes the rows of the fixture's table t, in order.
func tableDigest(file string) ([32]byte, error) {
	c, err := sqlite3.Open("file:" + file + "?vfs=os&mode=ro")
	if err != nil {
		return [32]byte{}, err
	}
	defer c.Close()
	st, _, err := c.Prepare("SELECT id, v FROM t ORDER BY id")
	if err != nil {
		return [32]byte{}, err
	}
	defer st.Close()
	h := sha256.New()
	var id [8]byte
	for st.Step() {
		binary.BigEndian.PutUint64(id[:], uint64(st.ColumnInt64(0)))
		h.Write(id[:])
		h.Write(st.ColumnRawBlob(1))
	}
	if err := st.Err(); err != nil {
		return [32]byte{}, err
	}
	return [32]byte(h.Sum(nil)), nil
}
