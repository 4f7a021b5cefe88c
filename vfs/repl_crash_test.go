package vfs

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// The crash test's child process: TestMain runs crashChild instead of the
// tests when this variable names a bucket URL.
const (
	envCrashBucket = "FRAMECTL_CRASH_CHILD_BUCKET"
	envCrashDir    = "FRAMECTL_CRASH_CHILD_DIR"
	envCrashActor  = "FRAMECTL_CRASH_CHILD_ACTOR"
	envCrashSeed   = "FRAMECTL_CRASH_CHILD_SEED"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envCrashBucket); url != "" {
		if err := crashChild(url); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild commits in async mode and, after every few commits, waits for
// Durable and prints "ACK <id>": every row up to id is acknowledged. It runs
// until it is killed.
func crashChild(url string) error {
	ctx := context.Background()
	b, err := bucket.Open(ctx, url)
	if err != nil {
		return err
	}
	actor, err := hex.DecodeString(os.Getenv(envCrashActor))
	if err != nil {
		return err
	}
	seed, _ := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 7))
	db, err := Open(ctx, Config{Bucket: b, Namespace: "crash", Actor: actor, Epoch: 1, Dir: os.Getenv(envCrashDir)})
	if err != nil {
		return err
	}
	c, err := db.Conn()
	if err != nil {
		return err
	}
	if err := c.Exec("PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for id := 1; ; {
		for n := 1 + rng.IntN(8); n > 0; n-- {
			if err := c.Exec(fmt.Sprintf("INSERT INTO t VALUES(%d, randomblob(%d))", id, rng.IntN(3000))); err != nil {
				return err
			}
			id++
		}
		if err := db.Durable(ctx); err != nil {
			return err
		}
		fmt.Fprintf(out, "ACK %d\n", id-1)
		out.Flush()
	}
}

// TestAcknowledgedSurvivesSIGKILL: a child process commits, waits for
// Durable and reports what was acknowledged, and is killed with SIGKILL at a
// random moment. Every acknowledged row must be in the bucket.
func TestAcknowledgedSurvivesSIGKILL(t *testing.T) {
	backends := map[string]func(testing.TB) bucket.Bucket{"dir": buckettest.Dir, "s3": buckettest.S3}
	for _, name := range []string{"dir", "s3"} {
		t.Run(name, func(t *testing.T) {
			for round := range 12 {
				crashRound(t, backends[name](t), uint64(round))
			}
		})
	}
}

func crashRound(t *testing.T, b bucket.Bucket, seed uint64) {
	id := make([]byte, 8)
	for i := range id {
		id[i] = byte(rand.Uint32())
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envCrashBucket+"="+bucketURL(t, b),
		envCrashDir+"="+filepath.Join(dir, "local"),
		envCrashActor+"="+hex.EncodeToString(id),
		envCrashSeed+"="+strconv.FormatUint(seed, 10))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := make(chan int, 1024)
	go func() {
		defer close(acks)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				v, _ := strconv.Atoi(n)
				acks <- v
			}
		}
	}()
	// Kill at a random moment once the child is committing.
	acked := 0
	select {
	case acked = <-acks:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child never acknowledged anything")
	}
	deadline := time.After(time.Duration(rand.IntN(400)) * time.Millisecond)
wait:
	for {
		select {
		case v, ok := <-acks:
			if !ok {
				break wait
			}
			acked = v
		case <-deadline:
			break wait
		}
	}
	cmd.Process.Kill() // SIGKILL
	for v := range acks {
		acked = v // acknowledged before the kill landed
	}
	cmd.Wait()

	a := frames.Actor{Namespace: frames.NamespaceID("", "crash"), Actor: hex.EncodeToString(id)}
	got := replaySession(t, b, a, 1)
	c, err := sqlite3.Open("file:" + got.Path + "?vfs=os&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	present := query1(t, c, fmt.Sprintf("SELECT count(*) FROM t WHERE id <= %d", acked))
	total := query1(t, c, "SELECT count(*) FROM t")
	if present != strconv.Itoa(acked) {
		t.Fatalf("round %d: %d rows acknowledged, the bucket holds %s of them", seed, acked, present)
	}
	t.Logf("round %d: %d rows acknowledged, %s in the bucket (sequence %d)", seed, acked, total, got.Seq)
}

// bucketURL returns a URL another process can open b with.
func bucketURL(t testing.TB, b bucket.Bucket) string {
	return b.String()
}
