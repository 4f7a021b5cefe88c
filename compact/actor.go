package compact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/restore"
)

// maxAttempts bounds the listings one pass takes when objects it listed
// vanish before it reads them. One retry is normally enough: the new
// listing shows what the other compactor left.
const maxAttempts = 3

// Actor runs one compaction pass over one actor: it reads own.json, lists
// the actor's objects, applies the size rule to the current session's log
// (Due), writes a new snapshot if the rule (or Options.Force) asks for one,
// then deletes what the current session's newest snapshot covers and the
// sessions it supersedes, as far as Options.Retention allows.
//
// It returns what it did even on error. An error means the pass stopped
// before deleting anything, or while deleting (a *Error with Op "delete",
// after which some of the keys it meant to delete may be gone, and Deleted
// is empty), or while collecting chunks (Op "collect", after the deletes);
// the bucket is restorable either way. When objects vanish while it reads
// them it lists again, up to three times, then fails with ErrRaced.
func Actor(ctx context.Context, b bucket.Bucket, a frames.Actor, opts Options) (Result, error) {
	start := time.Now()
	opts = opts.withDefaults()
	res := Result{Actor: a}
	if !a.Valid() {
		return res, &Error{Op: "list", Actor: a, Key: a.Prefix(), Err: fmt.Errorf("invalid actor (namespace %q, actor %q)", a.Namespace, a.Actor)}
	}
	log := opts.Logger.With(logattr.Actor, a.Prefix())
	var err error
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		err = pass(ctx, b, a, opts, log, &res)
		if err == nil || !errors.Is(err, bucket.ErrNotFound) || ctx.Err() != nil {
			break
		}
		if attempt == maxAttempts {
			err = fmt.Errorf("%w: %w", ErrRaced, err)
			break
		}
		log.Info("an object vanished while the pass read it; listing again", logattr.Err, err)
	}
	res.Duration = time.Since(start)
	switch {
	case err != nil:
		log.Warn("compaction pass failed", logattr.Err, err, "deleted", len(res.Deleted))
	case res.Snapshot != "" || len(res.Deleted) > 0 || res.ChunksDeleted > 0:
		log.Info("compacted", logattr.Epoch, res.Epoch, logattr.Key, res.Snapshot, logattr.Seq, res.Seq,
			"logBytes", res.RuleLogBytes, "dbBytes", res.RuleDBBytes, "read", res.BytesRead, "written", res.BytesWritten,
			"deleted", len(res.Deleted), "retained", res.Retained, "chunksDeleted", res.ChunksDeleted,
			"chunksKept", res.ChunksKeptByGrace, "chunksOwned", res.ChunksOwned, logattr.Duration, res.Duration)
	default:
		log.Debug("nothing to compact", logattr.Epoch, res.Epoch, "logBytes", res.RuleLogBytes, "dbBytes", res.RuleDBBytes,
			"retained", res.Retained)
	}
	return res, err
}

// ownState describes own.json for SnapshotSkipped.
func ownState(own *fence.Record) string {
	if own.Released() {
		return "own.json released without its end"
	}
	return fmt.Sprintf("own.json held by node %s", own.Node)
}

// pass is one attempt: one own.json read, one listing, and what follows
// from them. It resets res but for the counters of bytes moved.
//
// Another compactor racing this pass can make objects vanish (a 404: the
// pass starts over) but never shows it a gap: restore.Take lists log/
// before snapshot/ (byte order), a batch is only ever deleted after a
// snapshot at or past it is stored, and snapshots are listed after the
// batches, so whichever snapshot the listing shows as newest, every batch
// past it that existed when the log was listed is still listed.
func pass(ctx context.Context, b bucket.Bucket, a frames.Actor, opts Options, log *slog.Logger, res *Result) error {
	*res = Result{Actor: a, Attempts: res.Attempts, BytesRead: res.BytesRead, BytesWritten: res.BytesWritten}
	// own.json before the listing: a session the listing shows past
	// own.json's epoch is then a claim that began after this read (tier.go).
	own, err := readOwner(ctx, b, a)
	if err != nil {
		return err
	}
	// The collector's clock reading comes before the listing: a chunk it
	// judges old was old before anything the listing missed was uploaded.
	listedAt := opts.Now()
	inv, err := restore.Take(ctx, b, a)
	if err != nil {
		return &Error{Op: "list", Actor: a, Key: a.Prefix(), Err: err}
	}
	res.Retention = opts.Retention
	if own != nil && own.Retention > opts.Retention && !opts.ShortenRetention {
		opts.Retention, res.Retention, res.RetentionRecorded = own.Retention, own.Retention, true
	}
	current, ok := currentEpoch(inv, own)
	if !ok {
		return nil
	}
	res.Epoch = current
	owner := ownerOf(opts, own)
	if owner != nil {
		owner.listed(inv)
	}
	sess, ok := inv.Session(current)
	if !ok || len(sess.Snapshots) == 0 {
		log.Debug("the current session has no snapshot yet: nothing is covered", logattr.Epoch, current)
		return nil
	}

	base := sess.Snapshots[len(sess.Snapshots)-1]
	batches, logBytes := sessionLog(sess, base)
	hdr, baseManifest, err := owner.snapshotHeader(ctx, b, a, base.Key, opts.Limits, &res.BytesRead)
	if err != nil {
		return err
	}
	known := map[string]*frames.Manifest{base.Key: baseManifest}
	res.RuleLogBytes, res.RuleDBBytes = logBytes, dbBytes(hdr)
	res.Due = Due(res.RuleLogBytes, res.RuleDBBytes)
	res.LeftLogBytes, res.LeftDBBytes = res.RuleLogBytes, res.RuleDBBytes
	wanted := res.Due || (opts.Force && len(batches) > 0)
	if wanted && owner == nil && !opts.Live && mayBeLive(own) {
		res.SnapshotSkipped = fmt.Sprintf("session %d may still have a writer (%s): only its owner writes its snapshots", current, ownState(own))
		log.Info("writing no snapshot", logattr.Why, res.SnapshotSkipped)
		wanted = false
	}
	if wanted {
		nb, ok, err := build(ctx, b, inv, current, owner, opts, res)
		if err != nil {
			return err
		}
		if ok {
			// Every batch listed is now covered: the new snapshot is the
			// keep point with no retention, and the log left is empty.
			sess.Snapshots = append(sess.Snapshots, nb.obj)
			res.Snapshot, res.Seq = nb.obj.Key, nb.obj.Seq
			known[nb.obj.Key] = nb.manifest // the collector need not read it
			res.LeftLogBytes, res.LeftDBBytes = 0, nb.dbBytes
		}
	}

	var lin *lineage
	if opts.Retention > 0 {
		// What the window may keep of older sessions is what the lineage
		// reaches (lineage.go); with no window they all go anyway.
		var pred frames.Lineage
		if baseManifest != nil {
			pred = baseManifest.Predecessor
		}
		if lin, err = walkLineage(ctx, b, owner, inv, current, pred, baseManifest != nil, opts.Limits, &res.BytesRead); err != nil {
			return err
		}
	}
	del, retained := plan(inv, current, lin, opts)
	res.Retained = retained
	refs, err := references(ctx, b, owner, inv, known, opts, res)
	if err != nil {
		return err
	}
	if err := deleteAll(ctx, b, a, del); err != nil {
		return err
	}
	if owner != nil {
		owner.deleted(del.snapshots)
	}
	res.Deleted = append(del.snapshots, del.batches...)
	return collect(ctx, b, a, refs, owner, own, listedAt, opts, log, res)
}
