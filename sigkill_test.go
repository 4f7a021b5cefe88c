package framectl_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/internal/killtest"
	"github.com/framectl/framectl/internal/race"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// The kill test's child process: TestMain runs killChild instead of the
// tests when envKillBucket names a bucket URL.
const (
	envKillBucket = "FRAMECTL_KILL_CHILD_BUCKET"
	envKillDir    = "FRAMECTL_KILL_CHILD_DIR"
	envKillActor  = "FRAMECTL_KILL_CHILD_ACTOR"
	envKillSeed   = "FRAMECTL_KILL_CHILD_SEED"
	envKillEpoch  = "FRAMECTL_KILL_CHILD_EPOCH" // "node": claim through a node lease
	envKillNext   = "FRAMECTL_KILL_CHILD_TXN"   // first transaction number to use

	// envKills sets the number of kills of TestAcknowledgedSurvivesSIGKILL
	// (by hand: FRAMECTL_KILLS=1000).
	envKills = "FRAMECTL_KILLS"
)

func TestMain(m *testing.M) { killtest.Main(m, envKillBucket, killChild) }

// killLease is the node lease of the node-mode child: short, so that a
// restarted child's claim waits about a second for its killed
// predecessor's lease to run out.
var killLease = fence.Options{Lease: 400 * time.Millisecond, Grace: 300 * time.Millisecond}

// killChild opens the actor's database on its directory (the same one
// across restarts) and runs transactions until it is killed. It prints
//
//	OPENED <from> <kept> <discarded> <diverged>   once Open returned
//	C <txn>                                       transaction txn committed (locally)
//	ACK <txn>                                     every transaction up to txn is acknowledged
//
// Each transaction n inserts k rows (n, i) into t and adds k to the one row
// of ledger, whose last column names n: atomicity is checkable from the
// rows alone. Now and then a transaction writes a megabyte, so that kills
// land in large uploads; background compaction runs (the log reaches the
// database's size quickly), so kills land in compaction passes too.
func killChild(url string) error {
	ctx := context.Background()
	b, err := bucket.Open(ctx, url)
	if err != nil {
		return err
	}
	actor, err := hex.DecodeString(os.Getenv(envKillActor))
	if err != nil {
		return err
	}
	seed, _ := strconv.ParseUint(os.Getenv(envKillSeed), 10, 64)
	next, _ := strconv.Atoi(os.Getenv(envKillNext))
	rng := rand.New(rand.NewPCG(seed, 7))
	// Warnings go to stderr, which the test shows when a child fails.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The size rule without the bounds for small hot databases: the
	// database is small, and kills are meant to land in passes often.
	cfg := session.Config{Bucket: b, Namespace: "kill", Actor: actor, Dir: os.Getenv(envKillDir), RetryMin: 5e6, RetryMax: 100e6, Logger: logger,
		Compaction: compact.Rule{MinLogBytes: -1, MinInterval: -1}}
	if e := os.Getenv(envKillEpoch); e == "node" {
		node, err := fence.Register(ctx, b, "127.0.0.1:9", killLease)
		if err != nil {
			return err
		}
		cfg.Node = node
	} else if cfg.Epoch, err = frames.ParseEpoch(e); err != nil {
		return err
	}
	db, err := killOpen(ctx, &cfg, func() (*framectl.DB, error) { return framectl.Open(ctx, cfg) })
	if err != nil {
		return err
	}
	c, err := db.Conn()
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for n := next; ; n++ {
		if db.Stats().Stopped != nil && cfg.Node != nil {
			// The node lost its lease (a slow machine, a stalled bucket):
			// recover without a restart, as a runtime would.
			c.Close()
			restartNode(ctx, &cfg)
			old := db
			if db, err = killOpen(ctx, &cfg, func() (*framectl.DB, error) { return old.Reopen(ctx, cfg.Node) }); err != nil {
				return err
			}
			if c, err = db.Conn(); err != nil {
				return err
			}
		}
		k, size := 1+rng.IntN(6), rng.IntN(2000)
		if rng.IntN(40) == 0 {
			k, size = 16, 64<<10 // a megabyte: a large batch
		}
		sql := fmt.Sprintf(`BEGIN;
			INSERT INTO t SELECT %d, value, randomblob(%d) FROM generate_series(1, %d);
			UPDATE ledger SET rows = rows + %d, last = %d;
			COMMIT`, n, size, k, k, n)
		if err := c.Exec(sql); err != nil {
			if errors.Is(framectl.Refusal(err), session.ErrFenced) && cfg.Node != nil {
				continue // recovered above
			}
			return fmt.Errorf("transaction %d: %w", n, err)
		}
		fmt.Fprintf(out, "C %d\n", n)
		if rng.IntN(3) == 0 {
			if err := db.Durable(ctx); errors.Is(err, session.ErrFenced) && cfg.Node != nil {
				continue
			} else if err != nil {
				return err
			}
			fmt.Fprintf(out, "ACK %d\n", n)
		}
		out.Flush()
	}
}

// restartNode registers a new node in place of cfg.Node, which stopped,
// retrying while the bucket does not answer.
func restartNode(ctx context.Context, cfg *session.Config) {
	for {
		n, err := cfg.Node.Restart(ctx)
		if err == nil {
			cfg.Node = n
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killOpen opens (or reopens) the child's database, waiting out the lease
// of a killed predecessor (and, should its own node lose its lease while it
// waits, registering a new one), prepares the schema and prints OPENED.
func killOpen(ctx context.Context, cfg *session.Config, open func() (*framectl.DB, error)) (*framectl.DB, error) {
	for {
		db, err := open()
		if errors.Is(err, fence.ErrHeld) || errors.Is(err, fence.ErrHolderUnseen) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if cfg.Node != nil && (errors.Is(err, fence.ErrLeaseLost) || errors.Is(err, fence.ErrFenced)) {
			restartNode(ctx, cfg)
			open = func() (*framectl.DB, error) { return framectl.Open(ctx, *cfg) }
			continue
		}
		if err != nil {
			return nil, err
		}
		st := db.Stats().Start
		fmt.Printf("OPENED %s %d %d %q\n", st.From, st.Kept, st.Discarded, st.Diverged)
		c, err := db.Conn()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return db, c.Exec(`PRAGMA synchronous=NORMAL;
			CREATE TABLE IF NOT EXISTS t(txn INTEGER, i INTEGER, v BLOB, PRIMARY KEY(txn, i));
			CREATE TABLE IF NOT EXISTS ledger(id INTEGER PRIMARY KEY, rows INTEGER, last INTEGER);
			INSERT OR IGNORE INTO ledger VALUES(1, 0, 0)`)
	}
}

// killStats counts what the restarts found.
type killStats struct {
	mu                            sync.Mutex
	kills, opens                  int
	from                          map[string]int
	kept, discarded, diverged     int
	killedOpening                 int
	allDurable, reusedWhenDurable int
	notReused                     []string
}

// TestAcknowledgedSurvivesSIGKILL: a child process runs transactions on
// one actor's directory, waits for Durable now and then and reports what
// was acknowledged, and is killed with SIGKILL at a random moment: while it
// opens (restoring, uploading the session's first snapshot), while it
// commits, uploads large batches or compacts. Then it is restarted on the
// same directory, and killed again. After every kill the bucket is
// restored with package restore (integrity_check included) and must hold
// every acknowledged transaction, each whole, and never more rows than the
// ledger counts. Kills are spread over the directory bucket and versitygw,
// with explicit epochs and with node leases.
//
// Rounds: 100 kills (20 under -race, whose children run several times
// slower; test.sh runs this package without -race too), or FRAMECTL_KILLS.
func TestAcknowledgedSurvivesSIGKILL(t *testing.T) {
	kills := 100
	if race.Enabled {
		kills = 20
	}
	if v := os.Getenv(envKills); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 {
			t.Fatalf("%s=%q: want a number of kills, at least 4", envKills, v)
		}
		kills = n
	}
	const perActor = 10 // restarts on one directory
	stats := &killStats{from: map[string]int{}}
	backends := buckettest.Backends()
	for i := 0; i*perActor < kills; i++ {
		be := backends[i%len(backends)]
		mode := "epoch"
		if i%4 == 3 {
			mode = "node"
		}
		n := min(perActor, kills-i*perActor)
		t.Run(fmt.Sprintf("%s/%s/actor%d", be.Name, mode, i), func(t *testing.T) {
			killActor(t, be.New(t), mode, uint64(i), n, stats)
		})
	}
	stats.mu.Lock()
	defer stats.mu.Unlock()
	t.Logf("%d kills (%d while opening), %d opens: %v; %d kept and %d discarded unacknowledged commits, %d local copies moved aside; "+
		"after %d kills with every committed transaction in the bucket, %d opens reused the local copy (others: %q)",
		stats.kills, stats.killedOpening, stats.opens, stats.from, stats.kept, stats.discarded, stats.diverged,
		stats.allDurable, stats.reusedWhenDurable, stats.notReused)
}

func killActor(t *testing.T, b bucket.Bucket, mode string, seed uint64, kills int, stats *killStats) {
	id := make([]byte, 8)
	for i := range id {
		id[i] = byte(rand.Uint32())
	}
	a := frames.Actor{Namespace: frames.NamespaceID("", "kill"), Actor: hex.EncodeToString(id)}
	dir := filepath.Join(t.TempDir(), "local")
	var acked []int     // each child's last acknowledged transaction
	txn := 1            // the next child's first transaction
	allDurable := false // the previous child was killed with everything it committed in the bucket
	rng := rand.New(rand.NewPCG(seed, 99))
	for k := range kills {
		epoch := "node"
		if mode != "node" {
			epoch = strconv.Itoa(k + 1)
		}
		// Where to kill: a quarter of the kills during Open, the rest at a
		// random moment of the workload.
		whileOpening := rng.IntN(4) == 0
		var deadline <-chan time.Time
		if whileOpening {
			deadline = time.After(time.Duration(rng.IntN(150)) * time.Millisecond)
		}
		opened, diverged, lastAck, lastCommit := false, false, 0, 0
		child := killtest.Start(t, fmt.Sprintf("kill %d", k),
			envKillBucket+"="+b.String(), envKillDir+"="+dir, envKillActor+"="+hex.EncodeToString(id),
			envKillSeed+"="+strconv.FormatUint(seed*1000+uint64(k), 10), envKillEpoch+"="+epoch,
			envKillNext+"="+strconv.Itoa(txn))
		// SIGKILL at the deadline; the lines after it were printed before
		// the kill landed (an ACK among them was acknowledged).
		child.Kill(deadline, func(line string, killed bool) <-chan time.Time {
			switch f := strings.Fields(line); {
			case len(f) >= 4 && f[0] == "OPENED":
				opened = true
				diverged = diverged || len(f) >= 5 && f[4] != `""`
				stats.record(f, allDurable)
				if !whileOpening && !killed {
					return time.After(time.Duration(50+rng.IntN(700)) * time.Millisecond)
				}
			case len(f) == 2 && f[0] == "ACK":
				lastAck, _ = strconv.Atoi(f[1])
			case len(f) == 2 && f[0] == "C":
				lastCommit, _ = strconv.Atoi(f[1])
			}
			return nil
		})
		if diverged {
			t.Logf("kill %d: the child moved the local copy aside; it said:\n%s", k, child.Stderr())
		}
		if lastAck != 0 {
			acked = append(acked, lastAck)
		}
		restored := killCheck(t, b, a, k, acked)
		// The next child numbers its transactions past anything this one
		// may have committed: unacknowledged ones may have been kept.
		txn = max(restored, txn) + 1_000_000
		// A transaction committed after the last "C" line the kill cut
		// off can only be newer, so this errs towards "not all durable".
		allDurable = lastCommit != 0 && restored >= lastCommit
		stats.mu.Lock()
		stats.kills++
		if !opened {
			stats.killedOpening++
		}
		stats.mu.Unlock()
	}
}

func (s *killStats) record(f []string, prevAllDurable bool) {
	kept, _ := strconv.Atoi(f[2])
	discarded, _ := strconv.Atoi(f[3])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opens++
	s.from[f[1]]++
	s.kept += kept
	s.discarded += max(discarded, 0)
	if len(f) >= 5 && f[4] != `""` {
		s.diverged++
	}
	// Everything durable: the bucket held every transaction the child
	// printed as committed, and the next Open found no unacknowledged
	// commit either (one may commit between Exec and its "C" line).
	if prevAllDurable && kept == 0 && discarded == 0 {
		s.allDurable++
		if f[1] == session.StartReused.String() {
			s.reusedWhenDurable++
		} else {
			s.notReused = append(s.notReused, strings.Join(f[1:], " "))
		}
	}
}

// killCheck restores the actor from the bucket alone and checks it: every
// child's last acknowledged transaction present (the log is a prefix of
// what a child committed, so everything it acknowledged before is too),
// each transaction whole (the ledger, updated in the same transaction,
// agrees with the rows). It returns the last transaction the restored state
// holds.
func killCheck(t *testing.T, b bucket.Bucket, a frames.Actor, kill int, acked []int) int {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "restored.sqlite")
	res, err := restore.Restore(t.Context(), b, a, dest, restore.Options{})
	if err != nil {
		if len(acked) == 0 && errors.Is(err, restore.ErrNoSnapshot) {
			return 0 // killed before its first snapshot landed, nothing acknowledged
		}
		t.Fatalf("kill %d: restore: %v", kill, err)
	}
	c, err := sqlite3.Open("file:" + dest + "?vfs=os&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ic := dbtest.Query1(t, c, "PRAGMA integrity_check"); ic != "ok" {
		t.Fatalf("kill %d: restored database: integrity_check %s", kill, ic)
	}
	if dbtest.Query1(t, c, "SELECT count(*) FROM sqlite_master WHERE name = 'ledger'") == "0" {
		if len(acked) > 0 {
			t.Fatalf("kill %d: transactions %v acknowledged, the restored database has no ledger", kill, acked)
		}
		return 0
	}
	ledgerRows, _ := strconv.Atoi(dbtest.Query1(t, c, "SELECT rows FROM ledger"))
	last, _ := strconv.Atoi(dbtest.Query1(t, c, "SELECT last FROM ledger"))
	rows, _ := strconv.Atoi(dbtest.Query1(t, c, "SELECT count(*) FROM t"))
	maxTxn, _ := strconv.Atoi(dbtest.Query1(t, c, "SELECT coalesce(max(txn), 0) FROM t"))
	if rows != ledgerRows || maxTxn != last {
		t.Fatalf("kill %d: torn: %d rows, the ledger counts %d; newest transaction %d, the ledger names %d", kill, rows, ledgerRows, maxTxn, last)
	}
	for _, n := range acked {
		if dbtest.Query1(t, c, fmt.Sprintf("SELECT count(*) FROM t WHERE txn = %d", n)) == "0" {
			t.Fatalf("kill %d: transaction %d was acknowledged; the bucket (session %d, frame %d) does not hold it", kill, n, res.Epoch, res.Seq)
		}
	}
	return maxTxn
}
