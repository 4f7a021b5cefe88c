package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

var compactUsage = usage{forms: []string{
	"--bucket (--namespace [--tenant] | --namespace-id) [--actor] [--retention [--shorten-retention]] [--force] [--live] [--grace] [--scratch] [--sweep-leases] [--json [-v]]",
}, hint: "framectl compact --bucket file:///path/to/bucket --namespace NS", help: `
Runs one compaction pass over an actor, or over every actor of a namespace:
  - the size rule: once the log of the current session since its newest
    snapshot weighs as much as the database, a new snapshot is written from
    that snapshot and the batches after it (--force writes one whenever
    there are batches after it);
  - retention: what the newest snapshot covers is deleted, unless a
    point-in-time restore to less than the retention window ago may need
    it. The window is the longer of --retention and the one the actor's
    writer recorded in own.json (its session.Config.Retention), so compact never
    cuts the history a writer keeps; --shorten-retention applies
    --retention even when it is shorter;
  - the tier pass: sessions older than the current one are deleted once the
    current one has a snapshot;
  - chunks: a chunk object no snapshot names is deleted once it is older
    than --grace (default 1h): younger ones may belong to a manifest still
    being uploaded. The counts are in the output (chunksDeleted,
    chunksKeptByGrace).
Nothing is deleted before what replaces it is in the bucket, and a pass is
safe beside the live writer and beside another compactor.

A session that may still have a writer (own.json held by a node, or
released without its end recorded) gets no snapshot from compact: its owner
writes them, and deletes at once the chunks its own manifests stop naming,
which a snapshot built beside it may still name (snapshotSkipped says so).
--live writes one anyway: use it only when that writer is known dead.

--sweep-leases AGE also deletes node leases (nodes/*.json) the bucket last
wrote more than AGE ago: every crashed or fenced node leaves one behind. A
live node renews its lease every few seconds, so an AGE of an hour or more
only ever removes dead ones (a node whose lease is removed stops). The
lease of a node that an own.json names as holder is kept, and nothing is
deleted while an own.json is damaged.

Examples:
  framectl compact --bucket file:///var/lib/framectl/bucket --namespace chat
  framectl compact --bucket 's3://backups/prod?endpoint=minio:9000' --namespace chat --actor 726f6f6d2d31 --retention 168h
  framectl compact --bucket file:///var/lib/framectl/bucket --namespace chat --sweep-leases 24h
`}

type compactResult struct {
	Namespace    string       `json:"namespace"`
	Actor        string       `json:"actor"`
	Epoch        frames.Epoch `json:"epoch"` // the current session's; 0: nothing to do
	RuleLogBytes int64        `json:"ruleLogBytes"`
	RuleDBBytes  int64        `json:"ruleDbBytes"`
	Due          bool         `json:"due"`
	Snapshot     string       `json:"snapshot,omitempty"`
	Seq          frames.Seq   `json:"seq,omitempty"` // the snapshot's
	Deleted      []string     `json:"deleted"`
	Retained     int          `json:"retained"`
	// Chunks collected (named by no snapshot, older than the grace), and
	// kept because younger; CollectSkipped says why none was collected
	// when the pass could not tell which are named.
	ChunksDeleted     int    `json:"chunksDeleted"`
	ChunkBytesDeleted int64  `json:"chunkBytesDeleted"`
	ChunksKeptByGrace int    `json:"chunksKeptByGrace"`
	CollectSkipped    string `json:"collectSkipped,omitempty"`
	// SnapshotSkipped says why no snapshot was written although one was
	// due: the session may still have a writer (see --live).
	SnapshotSkipped string `json:"snapshotSkipped,omitempty"`
	// RetentionNs is the window applied; RetentionRecorded says it is the
	// longer one own.json records, not --retention.
	RetentionNs       int64  `json:"retentionNs"`
	RetentionRecorded bool   `json:"retentionRecorded,omitempty"`
	BytesRead         int64  `json:"bytesRead"`
	BytesWritten      int64  `json:"bytesWritten"`
	Attempts          int    `json:"attempts"`
	DurationNs        int64  `json:"durationNs"`
	Error             string `json:"error,omitempty"`
}

type compactReport struct {
	Bucket      string          `json:"bucket"`
	Retention   string          `json:"retention"`
	Grace       string          `json:"grace"`
	Actors      []compactResult `json:"actors"`
	SweptLeases []string        `json:"sweptLeases,omitempty"`
	Error       *jsonError      `json:"error,omitempty"` // some actor failed, or the sweep
}

func newCompactResult(r compact.Result) compactResult {
	deleted := r.Deleted
	if deleted == nil {
		deleted = []string{}
	}
	return compactResult{Namespace: r.Actor.Namespace, Actor: r.Actor.Actor, Epoch: r.Epoch,
		RuleLogBytes: r.RuleLogBytes, RuleDBBytes: r.RuleDBBytes, Due: r.Due, Snapshot: r.Snapshot, Seq: r.Seq,
		Deleted: deleted, Retained: r.Retained,
		ChunksDeleted: r.ChunksDeleted, ChunkBytesDeleted: r.ChunkBytesDeleted, ChunksKeptByGrace: r.ChunksKeptByGrace, CollectSkipped: r.CollectSkipped, SnapshotSkipped: r.SnapshotSkipped, RetentionNs: r.Retention.Nanoseconds(), RetentionRecorded: r.RetentionRecorded,
		BytesRead: r.BytesRead, BytesWritten: r.BytesWritten,
		Attempts: r.Attempts, DurationNs: r.Duration.Nanoseconds()}
}

func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newFlags("compact", compactUsage, stdout, stderr)
	url := c.bucketFlag()
	ns := c.namespaceFlags()
	actor := c.fs.String("actor", "", "compact only this actor (its `HEX` key)")
	retention := c.fs.Duration("retention", 0, "keep covered objects needed to restore to any time less than `DURATION` ago (e.g. 168h)")
	shorten := c.fs.Bool("shorten-retention", false, "apply --retention even where own.json records a longer retention")
	force := c.fs.Bool("force", false, "write a snapshot whenever batches follow the newest one, due or not")
	live := c.fs.Bool("live", false, "write snapshots of sessions that may still have a writer (only when it is known dead)")
	grace := c.fs.Duration("grace", compact.DefaultGrace, "delete chunks no snapshot names once older than `DURATION` (a minute or more)")
	scratch := c.fs.String("scratch", "", "`DIR` to rebuild the database in before upload (default the system's temporary directory)")
	sweep := c.fs.Duration("sweep-leases", 0, "also delete node leases last written more than `AGE` ago (an hour or more)")
	out := c.outputFlags()
	sc, code, ok := c.parseScope(args, ns, actor)
	if !ok {
		return code
	}
	switch {
	case sc.namespace == "":
		return c.usageError("--namespace (or --namespace-id) is required")
	case *retention < 0:
		return c.usageError("--retention %s: must not be negative", *retention)
	case *grace < time.Minute:
		return c.usageError("--grace %s: use a minute or more (a younger chunk may belong to a manifest still being uploaded)", *grace)
	case *sweep < 0 || *sweep > 0 && *sweep < time.Minute:
		return c.usageError("--sweep-leases %s: use an age of an hour or more (a live node renews every few seconds)", *sweep)
	}
	b, code, ok := c.createBucket(ctx, *url)
	if !ok {
		return code
	}

	opts := compact.Options{Retention: *retention, ShortenRetention: *shorten, Force: *force, Live: *live, ScratchDir: *scratch, Grace: *grace}
	var (
		results []compact.Result
		errs    []error // each failed pass (a *compact.Error naming its actor), then the sweep's
	)
	if sc.actor.Actor != "" {
		if err := mustExist(ctx, b, sc); err != nil {
			return c.fail(err)
		}
		r, err := compact.Actor(ctx, b, sc.actor, opts)
		results = []compact.Result{r}
		if err != nil {
			errs = append(errs, err)
		}
	} else {
		var err error
		results, err = compact.Namespace(ctx, b, sc.namespace, opts)
		if err == nil && len(results) == 0 {
			return c.fail(sc.notFound(b))
		}
		if err != nil {
			errs = append(errs, unjoin(err)...)
		}
	}

	rep := compactReport{Bucket: b.String(), Retention: retention.String(), Grace: grace.String(), Actors: []compactResult{}}
	failures := map[frames.Actor]error{}
	for _, e := range errs {
		var ce *compact.Error
		if errors.As(e, &ce) && ce.Actor.Actor != "" {
			failures[ce.Actor] = e
		}
	}
	for _, r := range results {
		cr := newCompactResult(r)
		cr.Error = errString(failures[r.Actor])
		rep.Actors = append(rep.Actors, cr)
	}
	if *sweep > 0 {
		swept, err := fence.SweepLeases(ctx, b, *sweep, time.Now())
		rep.SweptLeases = swept
		if err != nil {
			errs = append(errs, err)
		}
	}
	failed := errors.Join(errs...)
	if failed != nil {
		rep.Error = newJSONError(exitCode(failed), failed)
	}
	if out.json {
		if err := c.emit(rep); err != nil {
			return c.fail(err)
		}
	} else {
		for _, r := range rep.Actors {
			printCompact(stdout, r)
		}
		if *sweep > 0 {
			fmt.Fprintf(stdout, "swept %d node leases older than %s\n", len(rep.SweptLeases), *sweep)
		}
	}
	if failed != nil {
		for _, e := range errs {
			fmt.Fprintf(stderr, "framectl compact: %s\n", oneLine(e.Error()))
		}
		return exitCode(failed)
	}
	return exitOK
}

// mustExist fails with errNotFound when an actor's scope has no object at
// all.
func mustExist(ctx context.Context, b bucket.Bucket, sc scope) error {
	page, err := b.List(ctx, sc.prefix(), "", 1)
	if err != nil {
		return fmt.Errorf("listing %s: %w", sc.prefix(), err)
	}
	if len(page.Objects) == 0 {
		return sc.notFound(b)
	}
	return nil
}

func printCompact(w io.Writer, r compactResult) {
	fmt.Fprintf(w, "actor %s (do/%s/%s/)\n", r.Actor, r.Namespace, r.Actor)
	if r.Epoch == 0 {
		fmt.Fprintln(w, "  no session with a snapshot: nothing to do")
	} else {
		due := "not due"
		if r.Due {
			due = "due"
		}
		fmt.Fprintf(w, "  session %d: log %s since the newest snapshot, database %s: %s\n",
			r.Epoch, fmtBytes(r.RuleLogBytes), fmtBytes(r.RuleDBBytes), due)
		if r.SnapshotSkipped != "" {
			fmt.Fprintf(w, "  wrote no snapshot: %s\n", r.SnapshotSkipped)
		}
		if r.Snapshot != "" {
			fmt.Fprintf(w, "  wrote snapshot %s through seq %d (%s read, %s written)\n",
				r.Snapshot, r.Seq, fmtBytes(r.BytesRead), fmtBytes(r.BytesWritten))
		}
		recorded := ""
		if r.RetentionRecorded {
			recorded = ", recorded in own.json"
		}
		fmt.Fprintf(w, "  deleted %d objects, kept %d for retention %v%s, in %s\n",
			len(r.Deleted), r.Retained, time.Duration(r.RetentionNs), recorded, fmtDuration(time.Duration(r.DurationNs)))
		fmt.Fprintf(w, "  chunks: deleted %d (%s) named by no snapshot, kept %d younger than the grace\n",
			r.ChunksDeleted, fmtBytes(r.ChunkBytesDeleted), r.ChunksKeptByGrace)
		if r.CollectSkipped != "" {
			fmt.Fprintf(w, "  collected no chunks: %s\n", r.CollectSkipped)
		}
	}
	if r.Error != "" {
		fmt.Fprintf(w, "  FAILED: %s\n", r.Error)
	}
}
