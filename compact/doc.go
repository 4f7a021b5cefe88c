// Package compact keeps an actor's objects in the bucket bounded: it applies
// the size rule to the current session (snapshot once the log since the
// newest snapshot weighs as much as the database, rule.go; a writer's
// Trigger also waits for a minimum log and a minimum interval between
// passes, Rule, so that a small database written fast is not compacted
// after every batch), builds a
// snapshot from the session's newest snapshot and the batches after it
// (build.go), deletes what that snapshot covers (delete.go), keeps covered
// objects for a point-in-time window (retention.go), deletes the
// sessions a newer owner has superseded (tier.go), and deletes the chunks no
// snapshot names any more (collect.go). Actor runs one pass of all of it
// over one actor; Namespace runs it over every actor of a namespace; Trigger
// tells a writer, from the batches it uploads, when to run Actor.
//
// # Safety
//
// A pass never deletes anything before everything that replaces it is in the
// bucket: the new snapshot is uploaded (and the upload acknowledged) before
// the first delete, and a failed pass (an unreadable own.json, a damaged or
// missing object, a failed upload) deletes nothing. What a pass deletes is
// decided from one listing taken at its start, so it never deletes an object
// it has not seen: the live writer's batches uploaded after that listing are
// never touched. Concretely, a pass only ever deletes
//
//   - in the current session, batches ending at or before the sequence
//     number of a snapshot that exists, and snapshots older than it;
//   - sessions older than the current one, once the current one has a
//     snapshot (with a retention window, the part of them the lineage
//     reaches stays while the window needs it);
//   - chunks that no snapshot in its listing names and that are older
//     than the grace (see Collecting chunks);
//
// and never a session newer than the current one, never the current
// session's newest snapshot, never a key it does not parse.
//
// It is safe beside a live writer (which only appends batches past the
// listing) and beside another compactor: an object that vanishes while a pass
// reads it (someone else compacted) makes the pass start over from a new
// listing; two passes that write the same snapshot key write the same state
// (the frames and so the database bytes are fixed, and the compressor is
// deterministic for one level), so either object is right; deletes of missing
// objects succeed.
//
// # Memory and disk
//
// The replay is package restore's (restore.Replay): batches are fetched
// ahead within a byte budget (Options.MaxInflightBytes), and nothing else
// is held in memory in proportion to the database but the lanes package's
// page hash table (8 bytes per page) and, over a manifest, one byte per
// chunk. The chunks a frame touches are fetched within the same budget
// before it is applied, so about three times the budget is the most a
// pass holds. The state is rebuilt in a scratch directory
// (Options.ScratchDir): over a manifest, in sparse files holding only the
// chunks the log touched and the pages it wrote; from a full snapshot,
// the whole database. A manifest's changed chunks are encoded in memory
// within the chunks package's budget and uploaded one by one; a full
// snapshot is written to a file there before it is uploaded. So a pass
// over a manifest needs about the touched chunks on that disk (all of
// the database where files cannot be sparse), one from a full snapshot
// about the database's size plus its compressed size, and a pass removes
// it all when it ends.
//
// # Chunks
//
// When the session's snapshot is a manifest, so is the new one (build.go):
// it names the base manifest's chunks wherever the pages did not change
// and carries the session's lineage, so a pass uploads the chunks the log
// changed and the manifest; and it is built from the chunks the log
// touches, so a pass reads the manifest, the log and those chunks, not
// the database. Chunks belong to no session: the tier pass and
// retention delete manifests and batches, never a chunk.
//
// # Collecting chunks
//
// The last step of a pass (collect.go) deletes the chunks no snapshot of
// its listing names, once they are older than the grace (Options.Grace,
// DefaultGrace, an hour) by the modification time the bucket lists against
// the pass's clock read before the listing. It reads every snapshot listed
// (one GET each, skipped when the manifests the pass holds already name
// every chunk; with no retention, the snapshots left are mostly the ones it
// holds, so it reads few or none), the ones it is about
// to delete included, so a chunk goes only in a pass after the one that
// deleted the last manifest naming it. A manifest names only chunks
// stored before it (package chunks uploads them first), so the danger is
// a manifest not in the bucket yet whose chunks the collector sees. Who
// writes one, and what keeps its chunks:
//
//   - A compaction in flight (this package's build, by the owner or by
//     framectl compact) has uploaded some chunks and not yet its manifest.
//     The chunks it uploaded are younger than the grace as long as the
//     upload of its changed chunks and its manifest takes less than the
//     grace (minus the skew between the collector's clock and the
//     bucket's): seconds to minutes against an hour. The base chunks it
//     names are named by its base manifest, the current session's newest,
//     which only a newer snapshot of the session makes deletable; a pass
//     that deletes it lists it, so its chunks survive that pass. What is
//     left: two compactions at once, the slower one writing a snapshot
//     older than the faster one's, with a chunk that only the deleted base
//     and the slower manifest name, collected by a third pass in between;
//     that snapshot is already covered, and goes in the next pass.
//     TestCollectBesideCompactionInFlight.
//   - A live writer waking (framectl.Open) reads the newest manifest of the
//     newest session, and its first manifest names that one's chunks,
//     which may be old; the manifest it read may be deleted meanwhile (by
//     a pass whose view predates the claim, or by hand). The grace does
//     not cover this: the claim does. The writer claims (own.json names its
//     epoch) before it lists; a pass that reads own.json after that finds
//     the current session without a snapshot and collects nothing, and a
//     pass that read it before reads it again just before its first delete
//     and, finding a new epoch, collects nothing. So no chunk is collected
//     from the claim until the session's first manifest is in the bucket,
//     however long the wake takes. Writers without own.json (outside
//     package session and fence) get no such protection.
//     TestCollectBesideWakingWriter.
//   - A second collector lists and deletes at the same time: deleting a
//     chunk that is gone is no error, and each deletes only what its own
//     listing shows unnamed and old. A writer may put an old unnamed chunk
//     again (same content, for a manifest in flight) after a collector
//     listed it: the collector Stats each chunk just before deleting it and
//     keeps one that changed since the listing, leaving a window of one
//     round trip between the Stat and the delete (a conditional delete
//     would close it; the bucket contract has none). TestCollectorsAtOnce.
//   - A zombie, an owner superseded and not yet fenced, uploads chunks and
//     then a manifest into its old session. Its chunks are young; once its
//     manifest lands, the tier pass deletes it (no restore uses a
//     superseded session's objects past the point its successor started
//     from), and after the grace its chunks go, except the ones a live
//     manifest names. A zombie's manifest may name chunks collected since
//     (its base was deleted with its session): it is unusable, and nothing
//     uses it. TestCollectBesideZombie.
//   - The owner of the session (Options.Owner: the writer, package session)
//     collects the chunks it put itself without the grace and without a
//     Stat, in one DeleteMany, as soon as no snapshot listed and no
//     manifest it wrote names them: the manifests
//     in flight that could name them are its own, and it has none while
//     its pass runs. A compaction by anyone else would be a manifest in
//     flight it does not know of, built on its newest manifest and naming
//     its chunks without putting them: so no one else writes a snapshot
//     of a session that may still have a writer (own.json held, or
//     released without its end) unless told the writer is dead
//     (Options.Live). TestOwnerCollectsItsChunksAtOnce,
//     TestSnapshotOnlyByOwner.
//
// A snapshot the collector cannot read (vanished since the listing, or
// damaged: frames.ErrDamage) might name any chunk: the pass collects nothing then and says
// why (Result.CollectSkipped). Bounds: a collecting pass holds one bit per
// listed chunk and the hashes of the manifests it read.
//
// # Running it from the writer
//
// The replicator of a database owns a Trigger, made when its session's
// first snapshot is uploaded: Rule.Trigger(pages × page size), with the
// writer's configured Rule (NewTrigger for the default one). Then:
//
//   - after each batch PUT succeeds, on the uploader goroutine (never in the
//     commit path), it calls Trigger.Uploaded with the object's size;
//   - when that returns true, it starts one goroutine that runs Actor with a
//     context cancelled when the database is closed or fenced, and calls
//     Trigger.Done with its outcome (the Trigger lets one pass run at a
//     time and backs off DefaultRetryDelay after a failure);
//   - Close cancels that context and waits for the goroutine, which removes
//     its scratch files on the way out;
//   - Options: ScratchDir on the database's own disk (a directory beside
//     the database, emptied at Open: a crash mid-pass leaves files there),
//     Compression and Logger as the replicator's, Retention as configured,
//     and Owner: one NewOwner(epoch) for every pass of the session, told
//     of the session's first manifest (Owner.Wrote).
//
// Example_replicator shows the calls. A pass never blocks a commit: it
// reads and writes only the bucket and its scratch directory.
package compact
