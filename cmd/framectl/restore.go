package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

var restoreUsage = usage{forms: []string{
	"--bucket (--namespace [--tenant] | --namespace-id) --actor --out [--to-seq | --at] [--nearest] [--parallel] [--json [-v]]",
	"--bucket (--namespace [--tenant] | --namespace-id) --all --out=DIR [--to-seq | --at] [--nearest] [--parallel] [--json [-v]]",
}, hint: "framectl restore --bucket file:///path/to/bucket --namespace NS --actor HEX --out actor.db", help: `
Restores one actor's SQLite database to FILE, or every actor of a namespace
into DIR (one file per actor, named <actor hex>.db). The session is the one
own.json names, else the newest with a snapshot; restore starts from its
newest snapshot at or before the target and applies the batches after it.
A target before the oldest state that session holds is looked for in the
session it continued (its manifests record which, and from which sequence
number: framectl ls shows it), and so on back, as far as retention kept
them; what a superseded owner wrote after its successor took over is never
restored.

Every object is read to its end and checked (gzip trailer, lengths, the
checksum chain frame by frame, the final checksum), a missing range of
sequence numbers is a gap that fails the restore naming it, and the result
passes PRAGMA integrity_check before it is renamed over FILE: a failed
restore leaves nothing behind. The restored file is in WAL mode, without a WAL.

Targets (default: the latest state):
  --to-seq N     the state after the last frame ending at or before sequence
                 number N (each commit is one, counted across sessions)
  --at TIME      the state after the last frame committed at or before TIME
                 (RFC 3339, e.g. 2025-06-01T12:00:00Z)
  --nearest      with --to-seq or --at: a target outside what the lineage
                 holds restores the nearest state instead of failing
Frames in a batch merge runs of commits, so a restore stops at a frame
boundary: the output says which sequence number and commit time it reached.

A target no session of the lineage can reach fails with exit 4 and names
the range of the oldest session tried: a sequence number past the newest
or before the oldest snapshot kept, a time before the oldest state it can
place in time (a new actor's first commit, or the oldest snapshot kept). A
time after the newest commit restores the newest state. With --nearest the
output says the target was out of range and which state was restored.

Examples:
  framectl restore --bucket file:///var/lib/framectl/bucket --namespace chat --actor 726f6f6d2d31 --out room-1.db
  framectl restore --bucket 's3://backups/prod?endpoint=minio:9000' --namespace chat --all --out ./restored/
  framectl restore --bucket file:///tmp/b --namespace-id Sx1CEZLQgCtH3lmtBp0oqA --actor 64656d6f --out old.db --at 2025-06-01T12:00:00Z
  framectl restore --bucket file:///tmp/b --namespace chat --actor 726f6f6d2d31 --out first.db --to-seq 1 --nearest
`}

// restoreResult is one restored actor, for output.
type restoreResult struct {
	Namespace      string          `json:"namespace"`
	Actor          string          `json:"actor"`
	Path           string          `json:"path"`
	Epoch          frames.Epoch    `json:"epoch"`
	Snapshot       string          `json:"snapshot"`
	BatchesApplied int             `json:"batchesApplied"`
	BatchesSkipped int             `json:"batchesSkipped"`
	Seq            frames.Seq      `json:"seq"`
	CommitTime     *time.Time      `json:"commitTime,omitempty"`
	Bytes          int64           `json:"bytes"`
	Checksum       frames.Checksum `json:"checksum"`
	ObjectsFetched int             `json:"objectsFetched"`
	BytesFetched   int64           `json:"bytesFetched"`
	Replans        int             `json:"replans"`
	DurationNs     int64           `json:"durationNs"`
	// OutOfRange: the target was outside the session and --nearest
	// restored Seq instead.
	OutOfRange *targetRange `json:"outOfRange,omitempty"`
}

// targetRange is what a session can restore, for a target outside it.
type targetRange struct {
	Requested string       `json:"requested"` // the target as asked
	Message   string       `json:"message"`
	Epoch     frames.Epoch `json:"epoch"`
	FirstSeq  frames.Seq   `json:"firstSeq"` // the oldest snapshot
	LastSeq   frames.Seq   `json:"lastSeq"`  // the newest state
	// For a time target: the oldest state the session can place in time.
	EarliestSeq  frames.Seq `json:"earliestSeq,omitempty"`
	EarliestTime *time.Time `json:"earliestTime,omitempty"`
}

func newTargetRange(e *restore.TargetError) *targetRange {
	r := &targetRange{Requested: e.Target.String(), Message: e.Error(), Epoch: e.Epoch,
		FirstSeq: e.FirstSeq, LastSeq: e.LastSeq, EarliestSeq: e.EarliestSeq}
	if !e.EarliestTime.IsZero() {
		t := e.EarliestTime.UTC()
		r.EarliestTime = &t
	}
	return r
}

// targetRangeOf returns the range of a *restore.TargetError in err, if any.
func targetRangeOf(err error) *targetRange {
	var e *restore.TargetError
	if !errors.As(err, &e) {
		return nil
	}
	return newTargetRange(e)
}

func newRestoreResult(r restore.Result) restoreResult {
	out := restoreResult{Namespace: r.Actor.Namespace, Actor: r.Actor.Actor, Path: r.Path, Epoch: r.Epoch,
		Snapshot: r.Snapshot, BatchesApplied: r.BatchesApplied, BatchesSkipped: r.BatchesSkipped, Seq: r.Seq,
		Bytes: r.Bytes, Checksum: r.Checksum, ObjectsFetched: r.ObjectsFetched, BytesFetched: r.BytesFetched,
		Replans: r.Replans, DurationNs: r.Duration.Nanoseconds()}
	if !r.CommitTime.IsZero() {
		t := r.CommitTime.UTC()
		out.CommitTime = &t
	}
	if r.OutOfRange != nil {
		out.OutOfRange = newTargetRange(r.OutOfRange)
	}
	return out
}

func (r restoreResult) summary() string {
	committed := ""
	if r.CommitTime != nil {
		committed = " (committed " + r.CommitTime.Format(time.RFC3339Nano) + ")"
	}
	d := time.Duration(r.DurationNs)
	s := fmt.Sprintf("%s: session %d, seq %d%s, %s from a snapshot and %d batches (%d skipped as covered), "+
		"%d objects / %s fetched in %s (%s)",
		r.Path, r.Epoch, r.Seq, committed, fmtBytes(r.Bytes), r.BatchesApplied, r.BatchesSkipped,
		r.ObjectsFetched, fmtBytes(r.BytesFetched), fmtDuration(d), fmtRate(r.BytesFetched, d))
	if r.OutOfRange != nil {
		s += fmt.Sprintf("; OUT OF RANGE: %s: restored the nearest state, seq %d", r.OutOfRange.Message, r.Seq)
	}
	return s
}

type restoreReport struct {
	Bucket   string          `json:"bucket"`
	Target   string          `json:"target"`
	Restored []restoreResult `json:"restored"`
	Failed   []string        `json:"failed,omitempty"`
	Error    *jsonError      `json:"error,omitempty"`
}

func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newFlags("restore", restoreUsage, stdout, stderr)
	url := c.bucketFlag()
	ns := c.namespaceFlags()
	actor := c.fs.String("actor", "", "restore this actor (its `HEX` key, as ls prints) to the file --out")
	all := c.fs.Bool("all", false, "restore every actor of the namespace into the directory --out")
	dest := c.fs.String("out", "", "the database `FILE` to write (with --all: the DIRECTORY)")
	toSeq := c.fs.String("to-seq", "", "restore the state after the last frame ending at or before sequence number `N`")
	at := c.fs.String("at", "", "restore the state after the last frame committed at or before `TIME` (RFC 3339)")
	nearest := c.fs.Bool("nearest", false, "with --to-seq or --at: restore the nearest state when the target is outside what the session holds")
	parallel := c.fs.Int("parallel", 0, "`N` batches fetched ahead of the replay (default 4); with --all also actors at once")
	out := c.outputFlags()
	if code, ok := c.parseFlags(args); !ok {
		return code
	}
	nsID, err := ns.resolve()
	switch {
	case err != nil:
		return c.usageError("%v", err)
	case nsID == "":
		return c.usageError("--namespace (or --namespace-id) is required")
	case *actor == "" && !*all:
		return c.usageError("which actor? give --actor HEX (ls lists them) or --all for the whole namespace")
	case *actor != "" && *all:
		return c.usageError("--actor and --all exclude each other")
	case *dest == "":
		return c.usageError("--out is required: the file to write (with --all, a directory)")
	case *toSeq != "" && *at != "":
		return c.usageError("--to-seq and --at exclude each other")
	case *nearest && *toSeq == "" && *at == "":
		return c.usageError("--nearest applies to a target: give --to-seq N or --at TIME")
	case *parallel < 0:
		return c.usageError("--parallel %d: must be positive", *parallel)
	}
	opts := restore.Options{Parallelism: *parallel, Actors: *parallel}
	if *toSeq != "" {
		n, err := frames.ParseSeq(*toSeq)
		if err != nil {
			return c.usageError("--to-seq %q: not a sequence number (decimal, as ls and restore print them)", *toSeq)
		}
		opts.Target = restore.ToSeq(n)
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return c.usageError("--at %q: not an RFC 3339 time like 2025-06-01T12:00:00Z", *at)
		}
		opts.Target = restore.AtTime(t)
	}
	if *nearest {
		opts.Target = opts.Target.OrNearest()
	}
	st, statErr := os.Stat(*dest)
	switch {
	case *all && statErr == nil && !st.IsDir():
		return c.usageError("--out %s is a file: with --all it names a directory, one database per actor", *dest)
	case !*all && statErr == nil && st.IsDir():
		return c.usageError("--out %s is a directory: with --actor it names the database file to write", *dest)
	}
	var a frames.Actor
	if *actor != "" {
		if a, err = parseActor(nsID, *actor); err != nil {
			return c.usageError("%v", err)
		}
	}
	b, code, ok := c.openBucket(ctx, *url)
	if !ok {
		return code
	}

	label := "restore " + a.Actor
	if *all {
		label = "restore do/" + nsID + "/"
	}
	p := newProgress(stderr, out.progress(), label, 0, false)
	opts.Progress = progressOfRestore(p)
	rep := restoreReport{Bucket: b.String(), Target: opts.Target.String(), Restored: []restoreResult{}}
	if *all {
		results, err := restore.RestoreNamespace(ctx, b, nsID, *dest, opts)
		p.finish()
		for _, r := range results {
			rep.Restored = append(rep.Restored, newRestoreResult(r))
		}
		code = exitOK
		if err != nil {
			code = exitCode(err)
			for _, e := range unjoin(err) {
				rep.Failed = append(rep.Failed, errString(e))
				fmt.Fprintf(stderr, "framectl restore: %s\n", oneLine(e.Error()))
			}
			rep.Error = newJSONError(code, err)
			if len(rep.Failed) > 1 || len(results) > 0 {
				rep.Error.Message = fmt.Sprintf("%d actors failed, %d restored; the first failure: %s", len(rep.Failed), len(results), rep.Failed[0])
			}
		}
		if out.json {
			if err := c.emit(rep); err != nil {
				return c.fail(err)
			}
		} else {
			fmt.Fprintf(stdout, "restored %d actors of do/%s/ to %s (%s)\n", len(results), nsID, *dest, rep.Target)
			for _, r := range rep.Restored {
				fmt.Fprintf(stdout, "  %s %s\n", r.Actor, r.summary())
			}
			if len(rep.Failed) > 0 {
				fmt.Fprintf(stdout, "%d actors FAILED (see stderr)\n", len(rep.Failed))
			}
		}
		return code
	}

	r, err := restore.Restore(ctx, b, a, *dest, opts)
	if err != nil {
		p.clear()
		code := c.fail(err)
		if errors.Is(err, restore.ErrTargetOutOfRange) {
			fmt.Fprintln(stderr, "  try: a target in that range, or --nearest to restore the nearest state")
		}
		return code
	}
	p.finish()
	res := newRestoreResult(r)
	rep.Restored = append(rep.Restored, res)
	if out.json {
		if err := c.emit(rep); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "restored actor %s (%s) to %s\n", a.Actor, rep.Target, res.summary())
	return exitOK
}

// progressOfRestore feeds a restore's progress reports to p, summing the
// objects of every actor (RestoreNamespace reports from several goroutines).
func progressOfRestore(p *progress) func(restore.Progress) {
	var mu sync.Mutex
	type count struct{ done, total int }
	actors := map[frames.Actor]count{}
	return func(r restore.Progress) {
		mu.Lock()
		defer mu.Unlock()
		actors[r.Actor] = count{r.ObjectsDone, r.ObjectsTotal}
		var done, total int
		for _, c := range actors {
			done += c.done
			total += c.total
		}
		p.update(int64(done), int64(total))
	}
}

// unjoin returns the errors an errors.Join holds, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			if e != nil {
				out = append(out, e)
			}
		}
		return out
	}
	return []error{err}
}
