package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

var demoUsage = usage{forms: []string{"[--dir] [--bucket] [--commits] [--clients] [--seed] [--json [-v]]"},
	hint: "framectl demo --commits 2000", help: `
Runs framectl's whole cycle on one machine, with nothing to set up:
  1. opens a SQLite database replicated through framectl's VFS to a bucket
     (a local directory bucket unless --bucket names another);
  2. runs a workload of N commits from several clients (single-row inserts,
     updates and deletes, and multi-statement transfer transactions, plus a
     rolled-back transaction now and then), each client waiting for Durable
     (the output gate) before its next request, then closes the database;
  3. restores the actor from the bucket to a new file and checks that it is
     byte for byte the source database;
  4. verifies every object in the bucket;
and prints the numbers: commits, batches, bytes captured and uploaded,
PUTs, how long requests waited to be durable, restore time and throughput,
the verify result, and where the files are (kept for ls, inspect and
verify; remove the directory when done).

Examples:
  framectl demo
  framectl demo --dir /tmp/framectl-demo --commits 10000
  framectl demo --bucket 's3://test/demo?endpoint=127.0.0.1:7070&insecure=1' --json
`}

// demoNamespace is the namespace the demo writes its actor to.
const demoNamespace = "demo"

// demoAddress is the address the demo's node lease and claim advertise:
// where a runtime would forward the actor's requests. The demo serves none.
const demoAddress = "localhost:0"

type demoReplication struct {
	Commits       int64         `json:"commits"` // captured by the VFS
	Shipped       int64         `json:"shipped"` // commits shipped in batches
	Batches       int64         `json:"batches"`
	PUTs          int64         `json:"puts"`
	Retries       int64         `json:"retries"`
	PagesCaptured int64         `json:"pagesCaptured"`
	BytesCaptured int64         `json:"bytesCaptured"` // page bytes before merging
	BytesMerged   int64         `json:"bytesMerged"`   // after merging runs
	BytesUploaded int64         `json:"bytesUploaded"` // compressed objects
	DurableSeq    frames.Seq    `json:"durableSeq"`
	Close         time.Duration `json:"closeNs"`
}

type demoOwner struct {
	Node    string       `json:"node"`
	Address string       `json:"address"`
	Epoch   frames.Epoch `json:"epoch"`
}

type demoRestore struct {
	Path           string        `json:"path"`
	Epoch          frames.Epoch  `json:"epoch"`
	Seq            frames.Seq    `json:"seq"`
	Bytes          int64         `json:"bytes"` // the database
	ObjectsFetched int           `json:"objectsFetched"`
	BytesFetched   int64         `json:"bytesFetched"`
	Duration       time.Duration `json:"durationNs"`
	Identical      bool          `json:"identical"` // byte for byte the source database
	LastBatch      string        `json:"lastBatch,omitempty"`
}

func (r demoRestore) summary() string {
	return fmt.Sprintf("session %d through seq %d: %s database from %d objects (%s) in %s, %s",
		r.Epoch, r.Seq, fmtBytes(r.Bytes), r.ObjectsFetched, fmtBytes(r.BytesFetched),
		fmtDuration(r.Duration), fmtRate(r.BytesFetched, r.Duration))
}

type demoVerify struct {
	OK       bool            `json:"ok"` // no damage
	Objects  int             `json:"objects"`
	Bytes    int64           `json:"bytes"`
	Seq      frames.Seq      `json:"seq"`
	Duration time.Duration   `json:"durationNs"`
	Problems []verifyProblem `json:"problems"`
	// Chunks no manifest names, younger than the grace: no problem.
	ChunksWithinGrace int `json:"chunksWithinGrace"`
}

func (v demoVerify) summary() string {
	verdict := "clean"
	if !v.OK {
		verdict = "DAMAGED"
	}
	s := fmt.Sprintf("%s: %d objects (%s) read to their verified ends, checksum chain and integrity_check through seq %d, in %s",
		verdict, v.Objects, fmtBytes(v.Bytes), v.Seq, fmtDuration(v.Duration))
	for _, p := range v.Problems {
		s += fmt.Sprintf("\n            %s %s %s: %s", p.Severity, p.Kind, p.Key, p.Message)
	}
	return s
}

type demoReport struct {
	Bucket      string          `json:"bucket"`
	Dir         string          `json:"dir"`
	Source      string          `json:"source"`
	Namespace   string          `json:"namespace"`
	NamespaceID string          `json:"namespaceId"`
	Actor       string          `json:"actor"`    // the actor ID, as text
	ActorKey    string          `json:"actorKey"` // its hex path element
	Owner       demoOwner       `json:"owner"`
	Workload    workloadResult  `json:"workload"`
	Replication demoReplication `json:"replication"`
	Restore     demoRestore     `json:"restore"`
	Verify      demoVerify      `json:"verify"`
	OK          bool            `json:"ok"`
	Error       *jsonError      `json:"error,omitempty"` // not OK
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newFlags("demo", demoUsage, stdout, stderr)
	dir := c.fs.String("dir", "", "keep the source database, bucket and restored copy in `DIR` (default: a new temporary directory)")
	url := c.fs.String("bucket", "", "replicate to this bucket `URL` instead of DIR/bucket")
	commits := c.fs.Int("commits", 3000, "make `N` commits, schema and seeding included")
	clients := c.fs.Int("clients", 8, "`N` concurrent clients, each waiting for Durable after every request")
	seed := c.fs.Uint64("seed", 1, "seed the workload's random choices with `N`")
	out := c.outputFlags()
	code, ok := c.parseFlags(args)
	if !ok {
		return code
	}
	switch {
	case *commits < 3:
		return c.usageError("--commits %d: at least 3 (the schema and the seeding are two)", *commits)
	case *clients < 1 || *clients > 256:
		return c.usageError("--clients %d: from 1 to 256", *clients)
	}

	rep := &demoReport{Namespace: demoNamespace, NamespaceID: frames.NamespaceID("", demoNamespace)}
	var b bucket.Bucket
	if *url != "" { // a bad URL is a usage error before anything is created
		if b, code, ok = c.createBucket(ctx, *url); !ok {
			return code
		}
	}
	var err error
	if rep.Dir, err = demoDir(*dir); err != nil {
		if errors.Is(err, errDemoDirUsed) {
			return c.usageError("%v", err)
		}
		return c.fail(err)
	}
	if b == nil {
		if b, code, ok = c.createBucket(ctx, "file://"+filepath.Join(rep.Dir, "bucket")); !ok {
			return code
		}
	}
	rep.Bucket = b.String()
	// A new actor every run, so a shared --bucket never mixes two demos.
	var suffix [3]byte
	rand.Read(suffix[:])
	id := []byte("demo-" + hex.EncodeToString(suffix[:]))
	rep.Actor, rep.ActorKey = string(id), frames.ActorKey(id)
	actor := frames.Actor{Namespace: rep.NamespaceID, Actor: rep.ActorKey}
	sourceDir := filepath.Join(rep.Dir, "source")
	restored := filepath.Join(rep.Dir, "restored.sqlite")

	say := func(format string, args ...any) {
		if out.progress() {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}
	say("demo: replicating actor %q (%s) of namespace %q to %s", rep.Actor, rep.ActorKey, demoNamespace, rep.Bucket)

	// Close and release even after an interrupt, briefly.
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// Own the actor the way a runtime does: a node lease, a claim in
	// own.json for a new epoch, acknowledgements only while the lease
	// is valid; released at the end.
	node, err := fence.Register(ctx, b, demoAddress, fence.Options{})
	if err != nil {
		return c.fail(err)
	}
	defer node.Close(closeCtx)
	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: demoNamespace, Actor: id, Node: node, Dir: sourceDir})
	if err != nil {
		return c.fail(err)
	}
	rep.Owner = demoOwner{Node: node.ID(), Address: node.Address(), Epoch: db.Epoch()}
	rep.Source = db.Path()
	p := newProgress(stderr, out.progress(), "demo: commits", int64(*commits), false)
	wl, werr := runWorkload(ctx, db, workload{commits: *commits, clients: *clients, seed: *seed}, p)
	if werr == nil {
		p.finish()
	} else {
		p.clear()
	}
	t := time.Now()
	cerr := db.Close(closeCtx) // flushes, then releases the actor
	closeTime := time.Since(t)
	if cerr == nil {
		cerr = node.Close(closeCtx)
	}
	if err := errors.Join(werr, cerr); err != nil {
		return c.fail(fmt.Errorf("workload on %s: %w", rep.Source, err))
	}
	rep.Workload = wl
	st := db.Stats()
	rep.Replication = demoReplication{Commits: st.Commits, Shipped: st.Shipped, Batches: st.Batches, PUTs: st.PUTs,
		Retries: st.Retries, PagesCaptured: st.PagesCaptured, BytesCaptured: st.BytesRaw, BytesMerged: st.BytesMerged,
		BytesUploaded: st.BytesUploaded, DurableSeq: st.Durable, Close: closeTime}

	say("demo: restoring to %s", restored)
	if rep.Restore, err = demoRestoreActor(ctx, b, actor, restored, stderr, out.progress()); err != nil {
		return c.fail(err)
	}
	if rep.Restore.Identical, err = sameFile(rep.Source, restored); err != nil {
		return c.fail(err)
	}
	say("demo: verifying %s", actor.Prefix())
	if rep.Verify, err = demoVerifyActor(ctx, b, actor); err != nil {
		return c.fail(err)
	}
	rep.OK = rep.Restore.Identical && rep.Verify.OK && st.Commits == int64(wl.Commits)
	if !rep.OK {
		rep.Error = newJSONError(exitDamage, errors.New(demoFailure(rep)))
	}

	if out.json {
		if err := c.emit(rep); err != nil {
			return c.fail(err)
		}
	} else {
		printDemo(stdout, rep)
	}
	if !rep.OK {
		fmt.Fprintf(stderr, "framectl demo: FAILED: %s\n", rep.Error.Message)
		return exitDamage
	}
	return exitOK
}

// demoRestoreActor restores the actor to out, timing it.
func demoRestoreActor(ctx context.Context, b bucket.Bucket, a frames.Actor, out string, stderr io.Writer, progress bool) (demoRestore, error) {
	p := newProgress(stderr, progress, "demo: restore", 0, false)
	r, err := restore.Restore(ctx, b, a, out, restore.Options{Progress: progressOfRestore(p)})
	if err != nil {
		p.clear()
		return demoRestore{}, err
	}
	p.finish()
	dr := demoRestore{Path: r.Path, Epoch: r.Epoch, Seq: r.Seq, Bytes: r.Bytes, ObjectsFetched: r.ObjectsFetched,
		BytesFetched: r.BytesFetched, Duration: r.Duration}
	if r.BatchesApplied > 0 {
		dr.LastBatch = a.LogKey(r.Epoch, r.Seq)
	}
	return dr, nil
}

// demoVerifyActor verifies every object of the actor, as framectl verify
// does by default.
func demoVerifyActor(ctx context.Context, b bucket.Bucket, a frames.Actor) (demoVerify, error) {
	r, err := restore.Verify(ctx, b, a, restore.VerifyOptions{ChunkGrace: compact.DefaultGrace})
	if err != nil {
		return demoVerify{}, err
	}
	v := demoVerify{OK: !r.Damaged(), Objects: r.Objects, Bytes: r.Bytes, Seq: r.Seq, Duration: r.Duration,
		Problems: newVerifyReport(b.String(), a.Prefix(), []restore.Report{r}).Actors[0].Problems, ChunksWithinGrace: r.ChunksWithinGrace}
	return v, nil
}

var errDemoDirUsed = errors.New("already holds a demo")

// demoDir makes the demo's directory: dir if given (empty or new), else a
// new temporary one.
func demoDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "framectl-demo-")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "source")); err == nil {
		return "", fmt.Errorf("--dir %s %w (%s exists): give an empty or new directory", abs, errDemoDirUsed, filepath.Join(abs, "source"))
	}
	return abs, os.MkdirAll(abs, 0o755)
}

// sameFile reports whether two files hold the same bytes.
func sameFile(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}

func demoFailure(rep *demoReport) string {
	switch {
	case rep.Replication.Commits != int64(rep.Workload.Commits):
		return fmt.Sprintf("the VFS captured %d commits, the workload made %d", rep.Replication.Commits, rep.Workload.Commits)
	case !rep.Restore.Identical:
		return fmt.Sprintf("the restored database %s differs from the source %s", rep.Restore.Path, rep.Source)
	}
	return fmt.Sprintf("verify found %d problems in %s", len(rep.Verify.Problems), rep.Bucket)
}

func printDemo(w io.Writer, rep *demoReport) {
	wl, r, rs, v := rep.Workload, rep.Replication, rep.Restore, rep.Verify
	fmt.Fprintf(w, "framectl demo: a replicated SQLite workload, restored and verified\n\n")
	fmt.Fprintf(w, "actor       %q (key %s) in namespace %q (id %s)\n", rep.Actor, rep.ActorKey, rep.Namespace, rep.NamespaceID)
	fmt.Fprintf(w, "owner       node %s (lease in nodes/) claimed epoch %d in own.json, released at the end\n", rep.Owner.Node, rep.Owner.Epoch)
	fmt.Fprintf(w, "workload    %d commits from %d clients in %s (%.0f commits/s):\n", wl.Commits, wl.Clients,
		fmtDuration(wl.Duration), float64(wl.Commits)/wl.Duration.Seconds())
	fmt.Fprintf(w, "            schema + %d accounts (2 transactions), %d inserts, %d updates, %d deletes,\n",
		demoAccounts, wl.Inserts, wl.Updates, wl.Deletes)
	fmt.Fprintf(w, "            %d transfer transactions (2 updates + 1 insert each), %d rolled back (never shipped)\n",
		wl.Transfers, wl.RolledBack)
	fmt.Fprintf(w, "durable     every request waited for Durable before replying: median %s, p99 %s, max %s\n",
		fmtDuration(wl.DurableMedian), fmtDuration(wl.DurableP99), fmtDuration(wl.DurableMax))
	fmt.Fprintf(w, "replicated  %d commits captured, %d shipped in %d batches (%.1f commits per batch), %d PUTs, %d retries\n",
		r.Commits, r.Shipped, r.Batches, float64(r.Shipped)/max(1, float64(r.Batches)), r.PUTs, r.Retries)
	fmt.Fprintf(w, "            %d page versions = %s captured, %s after merging, %s uploaded (gzip), durable through seq %d\n",
		r.PagesCaptured, fmtBytes(r.BytesCaptured), fmtBytes(r.BytesMerged), fmtBytes(r.BytesUploaded), r.DurableSeq)
	fmt.Fprintf(w, "restore     %s\n", rs.summary())
	same := "yes"
	if !rs.Identical {
		same = "NO"
	}
	fmt.Fprintf(w, "            byte-identical to the source database: %s\n", same)
	fmt.Fprintf(w, "verify      %s\n", v.summary())
	fmt.Fprintf(w, "\nfiles       %s\n", rep.Dir)
	fmt.Fprintf(w, "  bucket    %s\n", rep.Bucket)
	fmt.Fprintf(w, "  source    %s\n", rep.Source)
	fmt.Fprintf(w, "  restored  %s\n", rs.Path)
	fmt.Fprintf(w, "\nnext (framectl is \"go run ./cmd/framectl\" in the repository, or go install ./cmd/framectl):\n")
	fmt.Fprintf(w, "  framectl ls --bucket %s --namespace %s --actor %s\n", shellQuote(rep.Bucket), demoNamespace, rep.ActorKey)
	if rs.LastBatch != "" {
		fmt.Fprintf(w, "  framectl inspect --bucket %s %s\n", shellQuote(rep.Bucket), rs.LastBatch)
	}
	fmt.Fprintf(w, "  framectl verify --bucket %s\n", shellQuote(rep.Bucket))
	fmt.Fprintf(w, "  rm -r %s\n", shellQuote(rep.Dir))
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '/' || r == '.' || r == '-' || r == '_' || r == ':') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
