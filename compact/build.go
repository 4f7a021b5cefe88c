package compact

// Building a snapshot: the session's newest snapshot and every batch after
// it, as listed at the start of the pass, are replayed by package restore
// (restore.Replay: batches fetched ahead in parallel within a memory
// budget, applied strictly in order, every object read to its verified
// end, the checksum chain checked frame by frame, gaps named, every lane
// file checked against its tracked checksum at the end), and the state
// reached is written as snapshot/<epoch>/<last seq applied>.
//
// Replay's PRAGMA integrity_check is left out: it guards against a capture
// that recorded wrong pages, but the log holds exactly the same pages, so a
// snapshot of them loses nothing a restore from the log would have had, and
// the check would cost a full SQLite scan of the database on every pass.
// Restore and verify still run it.
//
// When the session's snapshot is a manifest, the new snapshot is one too
// (chunks.Write), and it is built from what the log touches
// (restore.Options.LazyChunks): the base manifest is read, no chunk of it
// yet; the batches after it are read in order with every check above;
// before each frame is applied, the chunks it writes a page into, the
// last chunk when it grows the lane from a partial one, and the chunk a
// truncation ends inside are fetched, each checked against its hash and
// its reference's size and its pages against the fingerprint the manifest
// records, and written into a sparse scratch file. The chunks no frame
// touches are never read: the lane's tracker holds their fingerprints as
// their terms of the rolling checksum (lanes.NewLazySet), so the chain
// and the checksum after each frame are checked as for a database loaded
// whole, and chunks.Write, given the base as its prior, names them with
// their hash, stored size and fingerprint unread. The touched chunks are
// read back, hashed and uploaded unless the base names the same content.
// The manifest is the one loading the base whole gives, byte for byte
// (TestIncrementalMatchesFullReplay). A pass over a database of which a
// few pages changed reads the manifest, the log and those pages' chunks.
//
// The base is loaded whole instead when it cannot be used so: a chunk
// with no fingerprint recorded, fingerprints that do not XOR to the
// lane's checksum, chunks of another size than chunks.Write cuts (all
// lanes.ErrNotLazy). A session whose snapshot is a full snapshot (written
// before manifests) gets a full snapshot, so that no manifest claims a
// lineage nothing recorded. The new manifest carries the base's lineage
// (the session's).
//
// A full snapshot is written to a file in the scratch directory, then
// uploaded with its exact size: the bytes written are known exactly, and S3
// gets one seekable body (a plain PUT up to its single-PUT limit, which the
// client can retry) rather than a streamed multipart upload.

import (
	"bufio"
	"context"
	"io"
	"os"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
	"github.com/framectl/framectl/restore"
)

// snapshotHeader reads the header of a snapshot (the rule needs its
// database size), counting the bytes read into read, and returns the
// manifest too when it is one. Only the start of a full snapshot is read;
// a manifest is read whole (it holds no pages).
func snapshotHeader(ctx context.Context, b bucket.Bucket, a frames.Actor, key string, lim frames.Limits, read *int64) (frames.Snapshot, *frames.Manifest, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return frames.Snapshot{}, nil, &Error{Op: "read snapshot", Actor: a, Key: key, Err: err}
	}
	defer rc.Close()
	cr := iocount.NewReader(rc, nil)
	sr, m, err := frames.OpenSnapshot(cr, key, lim)
	*read += cr.Count()
	if err != nil {
		return frames.Snapshot{}, nil, &Error{Op: "read snapshot", Actor: a, Key: key, Err: err}
	}
	if m != nil {
		return m.Header(), m, nil
	}
	return sr.Header(), nil, nil
}

// built is a snapshot a pass has uploaded.
type built struct {
	obj      restore.Object
	dbBytes  int64
	manifest *frames.Manifest // nil for a full snapshot
}

// build replays the current session as inv lists it and uploads a snapshot
// of the state reached. It returns ok false, and uploads nothing, when the
// batches add no frame to the session's newest snapshot.
func build(ctx context.Context, b bucket.Bucket, inv *restore.Inventory, epoch frames.Epoch, owner *Owner, opts Options, res *Result) (built, bool, error) {
	a := inv.Actor
	plan, err := restore.PlanSession(ctx, b, inv, epoch, restore.Latest(), opts.Limits)
	if err != nil {
		return built{}, false, &Error{Op: "replay", Actor: a, Key: a.SnapshotSessionPrefix(epoch), Err: err}
	}
	rep, err := restore.Replay(ctx, b, plan, opts.ScratchDir, restore.Options{
		Limits: opts.Limits, MaxInflightBytes: opts.MaxInflightBytes, SkipIntegrityCheck: true, LazyChunks: !opts.fullReplay, Logger: opts.baseLogger})
	if err != nil {
		return built{}, false, &Error{Op: "replay", Actor: a, Key: plan.Snapshot.Key, Err: err}
	}
	defer rep.Close()
	res.BytesRead += rep.BytesFetched
	if rep.Seq == plan.Snapshot.Seq {
		return built{}, false, nil
	}

	key := a.SnapshotKey(epoch, rep.Seq)
	if rep.Manifest != nil {
		return buildManifest(ctx, b, a, epoch, rep, owner, opts, res)
	}
	f, err := os.CreateTemp(opts.ScratchDir, ".framectl-compact-*.snapshot")
	if err != nil {
		return built{}, false, &Error{Op: "write snapshot", Actor: a, Key: key, Err: err}
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	w := bufio.NewWriterSize(f, 256<<10)
	hdr, err := rep.Set.WriteSnapshot(ctx, w, epoch, frames.WriteOptions{Level: opts.Compression})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return built{}, false, &Error{Op: "write snapshot", Actor: a, Key: key, Err: err}
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return built{}, false, &Error{Op: "write snapshot", Actor: a, Key: key, Err: err}
	}
	// Unconditional: a create-only put would limit snapshots to the
	// single-PUT size, and an object already there under this key holds
	// this very state (see the package comment).
	if _, err := b.Put(ctx, key, f, size, bucket.Condition{}); err != nil {
		return built{}, false, &Error{Op: "upload", Actor: a, Key: key, Err: err}
	}
	res.BytesWritten += size
	// Its modification time is now as far as retention is concerned: the
	// pass that wrote it never counts it old.
	obj := restore.Object{Key: key, Kind: frames.KeySnapshot, Epoch: epoch, Seq: rep.Seq, Size: size, ModTime: opts.Now()}
	return built{obj: obj, dbBytes: dbBytes(hdr)}, true, nil
}

// buildManifest uploads the replayed state as a manifest sharing the base
// manifest's chunks and lineage.
func buildManifest(ctx context.Context, b bucket.Bucket, a frames.Actor, epoch frames.Epoch, rep *restore.Replayed, owner *Owner, opts Options, res *Result) (built, bool, error) {
	key := a.SnapshotKey(epoch, rep.Seq)
	srcs, err := rep.Set.Sources()
	if err != nil {
		return built{}, false, &Error{Op: "write snapshot", Actor: a, Key: key, Err: err}
	}
	m := frames.Manifest{Epoch: epoch, Seq: rep.Seq, CommitTime: rep.CommitTime, Predecessor: rep.Manifest.Predecessor}
	w, err := chunks.Write(ctx, b, a, m, srcs, chunks.HaveOf(rep.Manifest),
		chunks.Options{Compression: opts.Compression, Prior: rep.Manifest})
	if err != nil {
		return built{}, false, &Error{Op: "upload", Actor: a, Key: key, Err: err}
	}
	res.BytesWritten += w.Uploaded()
	if owner != nil {
		owner.Wrote(key, &w.Manifest, w.Put)
	}
	obj := restore.Object{Key: key, Kind: frames.KeySnapshot, Epoch: epoch, Seq: rep.Seq, Size: w.ManifestBytes, ModTime: opts.Now()}
	return built{obj: obj, dbBytes: dbBytes(w.Manifest.Header()), manifest: &w.Manifest}, true, nil
}
