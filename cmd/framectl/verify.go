package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

var verifyUsage = usage{forms: []string{"--bucket [--namespace [--tenant] | --namespace-id] [--actor] [--grace] [--parallel] [--scratch] [--json [-v]]"},
	hint: "framectl verify --bucket file:///path/to/bucket [--namespace NS [--actor HEX]]", help: `
Checks everything the bucket holds for one actor, every actor of a
namespace, or the whole bucket: every object of every session read to its
verified end (gzip trailer, seal, lengths), the current session replayed
from its snapshot with the checksum chain checked frame by frame, the final
checksums and PRAGMA integrity_check on the result, the log searched for
gaps, own.json checked against the sessions, and stray keys listed.

Every problem is printed with the object key and what is wrong. Damage
(the bucket cannot give back what was acknowledged) exits 1; warnings are
printed but exit 0: states a working cluster leaves behind (a missing
own.json, own.json released at an epoch with no objects after an open that
failed, a holder whose node lease is gone, superseded sessions awaiting the
tier pass, chunks no manifest names that no compaction collected within
--grace) and keys framectl does not write.

A chunk no manifest names that is younger than --grace (default 1h, as
compact's) is no problem and only counted (chunksWithinGrace in the JSON):
a working writer always leaves some, uploaded for a manifest still in
flight or named only by a manifest its last compaction pass replaced,
which a later pass collects; no compaction deletes one younger either.

Examples:
  framectl verify --bucket file:///var/lib/framectl/bucket
  framectl verify --bucket 's3://backups/prod?endpoint=minio:9000' --namespace chat --json
  framectl verify --bucket file:///tmp/b --namespace-id Sx1CEZLQgCtH3lmtBp0oqA --actor 64656d6f
`}

type verifyProblem struct {
	Key      string       `json:"key"`
	Kind     string       `json:"kind"`
	Severity string       `json:"severity"` // "damage" or "warning"
	Epoch    frames.Epoch `json:"epoch,omitempty"`
	From     frames.Seq   `json:"from,omitempty"` // a gap's missing sequence numbers
	To       frames.Seq   `json:"to,omitempty"`
	Message  string       `json:"message"`
}

type verifyActor struct {
	Namespace  string          `json:"namespace,omitempty"` // empty: keys outside any actor
	Actor      string          `json:"actor,omitempty"`
	Own        *fence.Record   `json:"own,omitempty"`
	Epoch      frames.Epoch    `json:"epoch"` // the current session's, 0 if none has a snapshot
	Seq        frames.Seq      `json:"seq"`   // the sequence number its replay reached
	Objects    int             `json:"objects"`
	Bytes      int64           `json:"bytes"`
	DurationNs int64           `json:"durationNs"`
	Damaged    bool            `json:"damaged"`
	Problems   []verifyProblem `json:"problems"`
	// Chunks no manifest names, younger than --grace: no problem.
	ChunksWithinGrace int `json:"chunksWithinGrace"`
}

type verifyReport struct {
	Bucket   string        `json:"bucket"`
	Prefix   string        `json:"prefix"`
	Clean    bool          `json:"clean"` // no damage (warnings allowed)
	Damage   int           `json:"damage"`
	Warnings int           `json:"warnings"`
	Actors   []verifyActor `json:"actors"`
	Error    *jsonError    `json:"error,omitempty"` // damage found
}

func newVerifyReport(bucketURL, prefix string, reports []restore.Report) verifyReport {
	rep := verifyReport{Bucket: bucketURL, Prefix: prefix, Actors: []verifyActor{}}
	for _, r := range reports {
		va := verifyActor{Namespace: r.Actor.Namespace, Actor: r.Actor.Actor, Own: r.Own, Epoch: r.Epoch, Seq: r.Seq,
			Objects: r.Objects, Bytes: r.Bytes, DurationNs: r.Duration.Nanoseconds(), Damaged: r.Damaged(),
			Problems: []verifyProblem{}, ChunksWithinGrace: r.ChunksWithinGrace}
		for _, p := range r.Problems {
			va.Problems = append(va.Problems, verifyProblem{Key: p.Key, Kind: string(p.Kind), Severity: p.Severity.String(),
				Epoch: p.Epoch, From: p.From, To: p.To, Message: p.Message})
			if p.Severity == restore.Damage {
				rep.Damage++
			} else {
				rep.Warnings++
			}
		}
		rep.Actors = append(rep.Actors, va)
	}
	rep.Clean = rep.Damage == 0
	return rep
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newFlags("verify", verifyUsage, stdout, stderr)
	url := c.bucketFlag()
	ns := c.namespaceFlags()
	actor := c.fs.String("actor", "", "verify only this actor (its `HEX` key)")
	grace := c.fs.Duration("grace", compact.DefaultGrace, "warn of a chunk no manifest names once it is older than `DURATION` (compact's --grace; 0: whatever its age)")
	parallel := c.fs.Int("parallel", 0, "`N` objects read at once, and actors verified at once (default 4)")
	scratch := c.fs.String("scratch", "", "`DIR` to replay each actor's database in (default the system's temporary directory)")
	out := c.outputFlags()
	sc, code, ok := c.parseScope(args, ns, actor)
	if !ok {
		return code
	}
	switch {
	case *parallel < 0:
		return c.usageError("--parallel %d: must be positive", *parallel)
	case *grace < 0:
		return c.usageError("--grace %s: must not be negative", *grace)
	}
	b, code, ok := c.openBucket(ctx, *url)
	if !ok {
		return code
	}

	label := "verify " + sc.prefix()
	if sc.namespace == "" {
		label = "verify"
	}
	p := newProgress(stderr, out.progress(), label, 0, false)
	p.unit = "objects"
	opts := restore.VerifyOptions{Parallelism: *parallel, Actors: *parallel, ScratchDir: *scratch, ChunkGrace: *grace,
		Progress: func(restore.Progress) { p.add(1) }}
	var (
		reports []restore.Report
		err     error
	)
	switch {
	case sc.actor.Actor != "":
		if err = mustExist(ctx, b, sc); err == nil {
			var r restore.Report
			r, err = restore.Verify(ctx, b, sc.actor, opts)
			reports = []restore.Report{r}
		}
	case sc.namespace != "":
		reports, err = restore.VerifyNamespace(ctx, b, sc.namespace, opts)
		if err == nil && len(reports) == 0 {
			err = sc.notFound(b)
		}
	default:
		reports, err = restore.VerifyPrefix(ctx, b, "", opts)
	}
	if err != nil {
		p.clear()
		return c.fail(err)
	}
	p.finish()

	prefix := sc.prefix()
	if sc.namespace == "" {
		prefix = "" // VerifyPrefix("") covers node leases and strays too
	}
	rep := newVerifyReport(b.String(), prefix, reports)
	var damage error
	if !rep.Clean {
		damage = fmt.Errorf("damage found: %d problems in %s", rep.Damage, rep.Bucket)
		rep.Error = newJSONError(exitDamage, damage)
	}
	if out.json {
		if err := c.emit(rep); err != nil {
			return c.fail(err)
		}
	} else {
		printVerify(stdout, &rep)
	}
	if damage != nil {
		fmt.Fprintf(stderr, "framectl verify: %v\n", damage)
		return exitDamage
	}
	return exitOK
}

func printVerify(w io.Writer, rep *verifyReport) {
	objects := 0
	for _, a := range rep.Actors {
		objects += a.Objects
		if a.Actor == "" {
			fmt.Fprintf(w, "keys outside any actor:\n")
		} else {
			status := "ok"
			if a.Damaged {
				status = "DAMAGED"
			}
			fmt.Fprintf(w, "actor %s (do/%s/%s/): %s: session %d verified through seq %d, %d objects, %s, in %s\n",
				a.Actor, a.Namespace, a.Actor, status, a.Epoch, a.Seq, a.Objects, fmtBytes(a.Bytes),
				fmtDuration(time.Duration(a.DurationNs)))
		}
		for _, p := range a.Problems {
			sev := "warning"
			if p.Severity == restore.Damage.String() {
				sev = "DAMAGE "
			}
			fmt.Fprintf(w, "  %s %-9s %s: %s\n", sev, p.Kind, p.Key, p.Message)
		}
		if a.ChunksWithinGrace > 0 {
			fmt.Fprintf(w, "  (%s)\n", chunksWithinGrace(a.ChunksWithinGrace))
		}
	}
	verdict := "clean"
	if !rep.Clean {
		verdict = fmt.Sprintf("DAMAGED (%d problems)", rep.Damage)
	}
	where := "under " + rep.Prefix
	if rep.Prefix == "" {
		where = "in the bucket"
	}
	fmt.Fprintf(w, "%s: %d actors, %d objects %s: %s, %d warnings\n", rep.Bucket, countActors(rep), objects, where, verdict, rep.Warnings)
}

// chunksWithinGrace says what verify counted and did not report.
func chunksWithinGrace(n int) string {
	what := fmt.Sprintf("%d chunks", n)
	if n == 1 {
		what = "1 chunk"
	}
	return what + " no manifest names yet, within the grace: for a manifest in flight, or awaiting collection"
}

func countActors(rep *verifyReport) int {
	n := 0
	for _, a := range rep.Actors {
		if a.Actor != "" {
			n++
		}
	}
	return n
}
