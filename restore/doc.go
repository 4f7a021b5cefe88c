// Package restore owns reading an actor back from a bucket: the inventory of
// what the bucket holds for it, the plan (which session, which snapshot,
// which batches), parallel fetching, replay through package lanes,
// verification, and point-in-time targets.
//
// It must never write a database that did not verify completely (the output
// is renamed into place only at the end), never skip a frame silently (a
// missing range is a gap, named), and never trust bytes from the bucket
// before their checks have passed.
//
// # Entry points
//
//   - Restore writes one actor's database to a file, RestoreNamespace every
//     actor of a namespace to a directory (framectl restore).
//   - Verify checks everything a bucket holds for an actor and reports what
//     is wrong object by object (verify.go says what is damage and what is
//     a warning); VerifyNamespace and VerifyPrefix check many actors
//     (framectl verify).
//   - PlanSession and Replay give compaction a verified state of one
//     session, rebuilt in scratch files it writes out as a snapshot: it
//     plans from the listing its pass took (Take) and, when an object
//     vanishes under the replay, starts its pass over.
//   - Take and Actors list what a bucket holds (framectl ls).
//
// # How a restore runs
//
// Restore lists the actor but for its chunks, which it reads by the names
// its manifest gives (inventory.go), then plans (plan.go): it reads own.json
// and picks the session, the newest snapshot at or before the target and
// the batches after it. The replay (replay.go, the one Replay runs for
// compaction) opens the snapshot object (frames.OpenSnapshot), which holds
// either a manifest or a full snapshot: a manifest's chunks are fetched in
// parallel (chunks.DefaultParallelism at once: each waits for the bucket
// more than for the CPU) within Options.MaxInflightBytes into scratch
// files (chunks.Load), a full snapshot streams into them
// (lanes.LoadSnapshot).
// Then up to Options.Parallelism batches are downloaded and decoded ahead,
// within the same byte budget (fetch.go; for a full snapshot, while it
// streams); frames are applied strictly in order, each batch read to its
// verified end. A batch that starts past the
// sequence number reached is skipped only when a later batch covers it,
// else the restore fails with a gap. Then the files are checked against
// the tracked checksums and SQLite's integrity_check runs on the database
// (through a read-only VFS that reads ahead, integrityvfs.go), both at
// once, while Restore's database file is synced beside them.
// An object deleted under the restore (compaction) makes Restore list and
// plan again, at most Options.MaxReplans times.
//
// A target before the oldest state the chosen session holds is looked for
// in the session it continued, along the lineage its manifests record
// (lineage.go): up to the point the successor continued from, never past
// it, so what a superseded owner wrote after its successor took over is
// never restored. Targets stop at frame boundaries: a frame in a batch is a
// merged run of commits. A target outside what the lineage holds is a
// *TargetError, not another state restored in its place, unless OrNearest
// asks for the nearest state (see Target).
package restore
