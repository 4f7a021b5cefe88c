// Package session owns the replication session of one actor's database
// on its owner: the claim (package fence), the local copy brought up to
// date at Open, the replicator that numbers the commits the capture hands
// it (sink.go), merges them into batches and uploads them to the bucket,
// durable acknowledgement (Durable, Sync mode, and with followers a quorum
// of them: peers.go), background compaction (compaction.go), the copies it
// keeps of its uploads (kept.go), the local state file (below), and Close,
// which releases the actor. Config, Stats, Observer and the errors callers
// decide on are its own.
//
// It knows the database as a file of pages of one size, never SQLite's
// formats: what only the SQLite side can do (prepare the file, read its
// page size, capture its commits) it asks of a Local, which package
// framectl gives from package capture. None of its own imports is
// go-sqlite3 (the restore it calls may use SQLite).
//
// A session starts at Open and ends at Close (or when the database stops:
// fenced, node lost, replication broken). Open decides what the session
// starts from with the local state file beside the database (state.go) and
// the bucket's listing (start.go): the local copy when it is current, the
// bucket's newest state otherwise; never an older state than the state
// file or own.json says the bucket holds (ErrListingBehind), and never by
// deleting a local copy that may hold commits the bucket lacks (kept,
// discarded or moved aside: Config.Unacknowledged, Stats.Start). The
// session's first snapshot is a manifest with the session's lineage,
// sharing every chunk of the bucket's newest manifest that still holds the
// same pages, so a session start uploads what changed since that manifest.
// Reopen starts the next session in the same process after the node
// stopped. Close records where the session ended in own.json, so that a
// lost tail is an error, not an older state.
//
// With followers (Config.Peers, peers.go), a commit is acknowledged once a
// quorum of the actor's followers hold it, or the bucket does, and the
// bucket is written in the background; Open first takes over from the
// followers the replaced owner recorded, and the tail they hold becomes
// the session's first batch (tail.go).
//
// # Acknowledgement
//
// Every path that tells a caller "durable" goes through Durable: Sync
// commits, the host's output gate, an alarm's completion, a drain's final
// flush, Close's flush before it releases. With a node, an acknowledgement
// by the bucket rests on a proof of ownership read from the bucket, never
// on a clock (proof.go; package fence, "Proof of ownership"): once the
// upload holding the commit landed, one GET of own.json that still names
// the session's claim. One proof covers every upload that landed before it
// began, it is made only while someone waits, and Stats.Proofs counts
// them. A proof that finds another claim stops the session with
// ErrFenced. An acknowledgement by q followers rests on their epoch check
// (package follow) and needs no read of the bucket. The node's lease is
// asked too, as an early stop: a node that knows it lost its lease
// acknowledges nothing. A Durable call with nothing new to acknowledge (a
// read-only reply), in either mode, passes on a proof begun less than
// Config.ReadProofAge ago and makes one otherwise: a read may be that
// stale; a write never rests on an old proof.
//
// What it must never do: skip a commit or upload one out of order,
// acknowledge a commit that is neither in the bucket nor held by a quorum
// of followers, acknowledge one by the bucket without a proof of
// ownership read after its upload landed, block the capture's calls on
// the network in async mode, go
// on replicating after the capture reported a write it cannot account for
// (Broken), or start a session from a state older than one the bucket
// acknowledged.
//
// # Local state file
//
// framectl.state, beside db.sqlite in [Config].Dir, records what this
// directory's database has sent to the bucket, so that the next [Open] can
// tell, without downloading anything, whether the local copy is what the
// bucket holds, is ahead of it (commits captured but never acknowledged),
// or must not be trusted. It is a fixed-size little-endian binary file,
// rewritten in place by pwrite and never fsynced (state.go says why):
//
//	offset size
//	     0    8  magic "framectl"
//	     8    4  version (1)
//	    12    4  page size
//	    16   16  boot ID of the machine that wrote it (zero: unknown)
//	    32   44  durable record: the newest object the bucket acknowledged
//	    76   44  in-flight record: the object being uploaded (zero: none)
//	   120   24  captured record: the last commit captured
//
//	record (durable and in-flight), little-endian:
//	     0    8  epoch
//	     8    8  sequence
//	    16    8  commit time of that sequence (Unix ns, 0 unknown)
//	    24    8  database checksum after it
//	    32    4  database size in pages after it
//	    36    4  object: 1 a batch (log/<epoch>/<sequence>), 2 a snapshot
//	             (snapshot/<epoch>/<sequence>)
//	    40    4  CRC-32 (IEEE) of bytes 0..40
//	A record of zeros (or whose CRC fails) is no record.
//
//	captured record: epoch (8), then the sequence (8), stored whole on
//	every commit at its 8-byte aligned offset (128); zero (8)
//
// A session writes its first snapshot as in flight before uploading it
// (rewriting the file with the bucket state the local copy is, when it is
// one: reused or restored), then the file anew once it landed; each batch
// as in flight before its PUT, then as durable before [Session.Durable]
// returns. Every commit stores its sequence in the captured record.
package session
