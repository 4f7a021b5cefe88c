package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fsync"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/lanes"
)

// Result describes a restore that succeeded.
type Result struct {
	Actor frames.Actor
	// Path is the restored database file.
	Path string
	// Epoch is the session restored, Snapshot the key of the snapshot it
	// started from, Manifest that snapshot when it is a manifest (nil for
	// a full snapshot): the chunks a writer going on from here knows the
	// bucket holds.
	Epoch    frames.Epoch
	Snapshot string
	Manifest *frames.Manifest
	// BatchesApplied and BatchesSkipped count the batches of the plan that
	// applied and that were skipped as covered (see Replayed).
	BatchesApplied, BatchesSkipped int
	// Seq is the sequence number reached, CommitTime the commit time of
	// that commit (zero when the snapshot carried none and no frame was
	// applied: a session's first snapshot does not know when its state was
	// committed).
	Seq        frames.Seq
	CommitTime time.Time
	// Bytes is the size of the database, Checksum its rolling checksum.
	Bytes    int64
	Checksum frames.Checksum
	// ObjectsFetched and BytesFetched count GETs with a body and the
	// compressed bytes read.
	ObjectsFetched int
	BytesFetched   int64
	// Replans is how often the restore started over because an object
	// vanished under it.
	Replans  int
	Duration time.Duration
	// OutOfRange is set when the target was outside what the session
	// holds and OrNearest restored the nearest state instead: it says
	// what was asked and the range available; Seq and CommitTime say
	// what was restored.
	OutOfRange *TargetError
}

// Restore writes actor a's database, as of opts.Target, to the file dest.
// A target outside what the chosen session holds is a *TargetError
// (ErrTargetOutOfRange) naming the range, unless it was made by OrNearest.
//
// It lists the actor (Take), chooses a session, snapshot and batches
// (planActor), fetches them in parallel, applies them in order through
// package lanes, and verifies everything (replay, see Replayed); an object
// deleted under it (compaction) makes it list and plan again, at most
// opts.MaxReplans times.
//
// The database is built in a scratch directory beside dest and renamed
// over dest only once everything verified, with the file and the directory
// synced: dest is replaced whole or not at all, and a failure leaves
// nothing behind. dest must not be a live database: a -wal or -journal
// file beside it is refused (ErrDestination), since SQLite would apply it
// to the restored file. The restored file is in WAL mode, with no WAL.
//
// Only the main lane (the SQLite database) is written; other lanes, which
// nothing writes today, are left out with a warning in the log.
func Restore(ctx context.Context, b bucket.Bucket, a frames.Actor, dest string, opts Options) (Result, error) {
	start := time.Now()
	opts = opts.withDefaults()
	fail := func(err error) (Result, error) {
		return Result{}, &Error{Op: "restore", Actor: a.Prefix(), Err: err}
	}
	if !a.Valid() {
		return fail(fmt.Errorf("invalid actor %+v", a))
	}
	dest, err := filepath.Abs(dest)
	if err != nil {
		return fail(err)
	}
	if err := checkDestination(dest); err != nil {
		return fail(err)
	}
	dir := filepath.Dir(dest)
	rep, replans, err := replayWithReplans(ctx, b, a, dir, opts)
	if err != nil {
		return Result{}, err
	}
	defer rep.Close()
	main, _ := rep.Set.Lane(lanes.MainLane) // Replay checked it exists
	for _, l := range rep.Set.Lanes() {
		if l.Number != lanes.MainLane {
			opts.Logger.Warn("lane left out: only the main lane is restored", logattr.Actor, a.Prefix(), "lane", l.Number)
		}
	}
	// The replay synced the main lane while it verified it (writeBack):
	// this finds little left to write.
	if err := rep.Set.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(main.Path, dest); err != nil {
		return fail(err)
	}
	if err := fsync.Dir(dir); err != nil {
		return fail(err)
	}
	res := Result{
		Actor: a, Path: dest, Epoch: rep.Plan.Epoch, Snapshot: rep.Plan.Snapshot.Key, Manifest: rep.Manifest,
		BatchesApplied: len(rep.Applied) - 1, BatchesSkipped: len(rep.Skipped),
		Seq: rep.Seq, Bytes: main.Bytes(), Checksum: main.Checksum,
		ObjectsFetched: rep.ObjectsFetched, BytesFetched: rep.BytesFetched, Replans: replans,
		Duration: time.Since(start), OutOfRange: rep.OutOfRange,
	}
	if rep.CommitTime != 0 {
		res.CommitTime = time.Unix(0, rep.CommitTime)
	}
	opts.Logger.Info("restored", logattr.Actor, a.Prefix(), logattr.Epoch, res.Epoch, logattr.Seq, res.Seq,
		logattr.Path, dest, "bytes", res.Bytes, logattr.Duration, res.Duration)
	report(opts, Progress{Actor: a, Phase: PhaseDone, ObjectsDone: len(rep.Applied) + len(rep.Skipped),
		ObjectsTotal: 1 + len(rep.Plan.Batches), BytesFetched: res.BytesFetched, Seq: res.Seq})
	return res, nil
}

// checkDestination refuses a destination that cannot be replaced whole.
func checkDestination(dest string) error {
	if fi, err := os.Stat(dest); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrDestination, dest)
	}
	for _, suffix := range []string{"-wal", "-journal"} {
		if fi, err := os.Stat(dest + suffix); err == nil && fi.Size() > 0 {
			return fmt.Errorf("%w: %s%s exists: SQLite would apply it to the restored database (checkpoint or remove it first)",
				ErrDestination, dest, suffix)
		}
	}
	return nil
}

// replayWithReplans lists, plans and replays a for Restore, starting over
// from a fresh listing when an object vanished, at most opts.MaxReplans
// times. It returns how many times it started over.
func replayWithReplans(ctx context.Context, b bucket.Bucket, a frames.Actor, scratchDir string, opts Options) (*Replayed, int, error) {
	var last error
	for attempt := 0; attempt <= opts.MaxReplans; attempt++ {
		report(opts, Progress{Actor: a, Phase: PhasePlan})
		inv, err := takeForRestore(ctx, b, a)
		if err != nil {
			return nil, 0, err
		}
		var rep *Replayed
		p, err := planActor(ctx, b, inv, opts.Target, opts.Limits)
		if err == nil {
			rep, err = replay(ctx, b, p, scratchDir, opts, &replayHooks{writeBack: true})
		}
		if err == nil {
			return rep, attempt, nil
		}
		if !errors.Is(err, bucket.ErrNotFound) || ctx.Err() != nil {
			return nil, 0, err
		}
		opts.Logger.Info("an object vanished: planning again", logattr.Actor, a.Prefix(), logattr.Attempt, attempt+1, logattr.Err, err)
		last = err
	}
	return nil, 0, &Error{Op: "restore", Actor: a.Prefix(), Err: fmt.Errorf("%w: last: %w", ErrReplans, last)}
}
