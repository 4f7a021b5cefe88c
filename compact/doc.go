// Package compact keeps an actor's objects in the bucket bounded: it applies
// the size rule to the current session (snapshot once the log since the
// newest snapshot weighs as much as the database, rule.go; a writer's
// Trigger also waits for a minimum log and a minimum interval between
// passes, Rule, so that a small database written fast is not compacted
// after every batch), builds a
// snapshot from the session's newest snapshot and the batches after it
// (build.go), deletes what that snapshot covers (delete.go), keeps covered
// objects for a point-in-time window (retention.go), and deletes the
// sessions a newer owner has superseded (tier.go). Actor runs one pass of all
// of it over one actor; Namespace runs it over every actor of a namespace;
// Trigger tells a writer, from the batches it uploads, when to run Actor.
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
//     snapshot;
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
// ahead within a byte budget (Options.MaxInflightBytes; about twice it is
// the most a pass holds), and nothing else is held in memory in proportion
// to the database but the lanes package's page hash table (8 bytes per
// page). The database is rebuilt in a scratch directory
// (Options.ScratchDir). A manifest's changed chunks are encoded in memory
// within the chunks package's budget and uploaded one by one; a full
// snapshot is written to a file there before it is uploaded. So a pass
// needs about the database's size on that disk (plus its compressed size
// for a full snapshot), and removes it all when it ends.
//
// # Chunks
//
// When the session's snapshot is a manifest, so is the new one (build.go):
// it names the base manifest's chunks wherever the pages did not change
// and carries the session's lineage, so a pass uploads the chunks the log
// changed and the manifest. A pass never deletes a chunk: chunks belong to
// no session, and a chunk only deleted manifests named stays (verify calls
// it a stray) until a collector that knows every retained manifest deletes
// it.
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
//     Compression and Logger as the replicator's, Retention as configured.
//
// Example_replicator shows the calls. A pass never blocks a commit: it
// reads and writes only the bucket and its scratch directory.
package compact
