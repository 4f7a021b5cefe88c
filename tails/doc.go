// Package tails owns a follower node's durable copy of the tails it holds
// for other nodes' actors: one follow.State per actor, fsynced before any
// reply reports it, bounded, crash-safe. Store.Save returns once a state
// is on disk; Store.Handle runs a follow.Follower per actor over the store
// and returns a reply only once the state it reports is durable; Store.Load
// gives the state back after a restart.
//
// What it must never do: report a state that is not on disk (a reply
// whose state was not fsynced, or a state read back that a crash could
// still take away); return a state that fails its checks (every state it
// returns passes follow.OpenFollower's, and a file damaged anywhere but in
// a torn last record is an error naming the file and the byte); grow past
// its bounds (follow.Limits.MaxTailBytes per actor, Config.MaxBytes for
// the files together, Config.CacheBytes of states kept in memory);
// allocate what a length in a file claims before checking it against the
// limits and the bytes there are. Which messages to take and what to
// answer are package follow's; carrying them, package peer's.
//
// # One append-only file per actor
//
// An Append adds a commit, a few KB, to a tail of up to MaxTailBytes, so
// rewriting the whole state per message would cost O(tail) per commit. A
// Save appends a record instead: the change from the state before (the
// new base, the promise, the entries past the old end), one write and one
// fsync. A record holding the whole state starts each file, and follows
// whenever the log is replaced (a reset from a new epoch). Once the dead
// part of a file (what the last whole state and the changes since make
// moot) is larger than its live part (a file holding the state alone) and
// 1 MiB, the file is rewritten: the state alone into a temporary file,
// fsynced, renamed over the old one, the directory fsynced. A rewrite
// writes no more bytes than were appended since the one before, and a
// file stays within twice its state, 1 MiB and a record (unless the
// store's bound leaves no room for the rewrite: see Bounds). Creating a
// file goes the same way, so a file's first record is always whole.
//
// One file per actor rather than one log for all: an actor's tail is
// trimmed, rewritten and deleted on its own, without copying the others';
// actors' appends fsync independently, in parallel; and a damaged file
// costs one actor, not every tail the node holds.
//
// The records are follow's own messages (follow.AppendMessage): a whole
// state is a Promise (Epoch the promised epoch), a change an Append (Epoch
// the promised epoch, Durable the new base, Entries those added, chained
// from Prev). They carry their own CRC-32C and are decoded with follow's
// bounded decoder (follow.DecodeMessage), so no second encoder of entries
// exists, and what the store reads is checked by the code that checks what
// peers send (both fuzzed: fuzz.FuzzFollowMessage, fuzz.FuzzTailsFile).
//
// # On disk
//
//	<dir>/tails.lock               the store's lock (package dirlock)
//	<dir>/follower.id              the store's follower ID (Store.ID): 16 hex digits and a newline
//	<dir>/<hex of actor>.tail      an actor's file
//	<dir>/<hex of actor>.tail.tmp  a rewrite under way; removed by Open
//
// Actor names are 1 to follow.MaxActorBytes bytes, any bytes, in the file
// name as lowercase hex. Integers are little-endian.
//
//	file:
//	+--------+--------+--------+-----
//	| header | record | record | ...
//	+--------+--------+--------+-----
//
//	header:
//	+---------+---------+--------------+------------+----------+
//	| magic   | version | actor length | actor      | CRC-32C  |
//	| 8 bytes | 1       | 1            | 1..120     | 4        |
//	+---------+---------+--------------+------------+----------+
//	magic "fctltail"; version 1; the CRC (Castagnoli) covers every byte before it.
//
//	record:
//	+---------+----------------+------------------------------------------+
//	| length  | CRC-32C        | message                                  |
//	| 4 bytes | of the length  | length bytes: one follow message         |
//	|         | 4              | (follow's wire format, its own CRC-32C)  |
//	+---------+----------------+------------------------------------------+
//	first record:   Promise  epoch = Promised | log epoch | base | entries       (the whole state)
//	later records:  Promise, as above, or
//	                Append   epoch = Promised | flags 0 | prev | durable = new base | entries
//
// A change applies as: drop the entries through the new base (or all, when
// it is past the log's end, and start the log there), then append the
// entries, which must chain from the log's end (Prev). A record is refused
// (frames.ErrCorrupt) if it lowers the promised or log epoch, moves the
// base back, names a base the log holds with another chain value, or does
// not extend the log at its end; a whole state or a change past
// MaxTailBytes is frames.ErrTooLarge; a length past
// follow.Limits.MaxMessageBytes is frames.ErrTooLarge before anything is
// read; a file of another magic or version is frames.ErrUnknownKind; one
// whose header names another actor, frames.ErrCorrupt. A record's header
// has a CRC of its length, so that the reader knows where the record ends
// before it trusts its message, and so which record is the last.
//
// # Torn writes
//
// A Save appends one record and fsyncs it before the next Save begins, so
// a crash can damage only the last record of a file, and only one that
// was never acknowledged. Such a record is dropped, logged, and cut off
// the file before anything is appended after it. What a crash leaves, and
// so what counts as torn: a last record that the file ends inside (its
// header, or the bytes its length gives, cut short), or one that fails its
// checks with one of its 512-byte sectors (split at the file's sector
// boundaries) all zeros, a part of the write the disk never did. A header
// that fails its CRC counts as torn only when one of its sectors is zeros
// and no whole record starts anywhere after it (the file holds no more
// than one record's bound past it). Anything else is an error naming the
// file and the byte: damage before the last record (records after it
// prove it was fsynced), a last record with a bit flipped, a damaged first
// record (files are created and rewritten whole, by rename). Like etcd's
// WAL (its decoder's torn-entry check) the call is made by sector, and the
// limit is the same: a last record damaged in a way a crash also leaves
// (cut short, or a sector zeroed) cannot be told from a torn one without a
// second fsync per Save, and is dropped although it may have been
// acknowledged. A disk that loses fsynced bytes is outside what follow's
// rule covers (a follower is trusted to keep what it acknowledged).
//
// A failed write or fsync is undone: the file is cut back to its last
// record and fsynced, which also drops from the kernel's cache what the
// failed write left there (after a failed fsync Linux may keep bytes in
// its cache that the disk lacks, and a later read would see them). If
// that fails too, or a directory fsync after a rename does, the actor is
// failed (ErrFailed) until the store is reopened. Open fsyncs the
// directory and Load each file before reading it, so that what an earlier
// process wrote and never synced is durable, or an error, before it is
// trusted.
//
// # Bounds
//
// Each actor's entries are bounded by follow.Limits.MaxTailBytes (the
// follower refuses past it: follow.RefuseFull). The store's files together
// are bounded by Config.MaxBytes, counted as file sizes, the new file of a
// rewrite included while the old one is still there: a write past it
// fails with ErrFull before anything is written. One the disk refuses
// (ENOSPC, EDQUOT) is ErrFull too, once cut back off the file. Handle then
// answers full, so that the owner replaces this follower. In memory, the
// store keeps the states of actors not in use within Config.CacheBytes
// and Config.MaxOpen, the least recently used going first; the actors in
// use hold their states too, each within MaxTailBytes. Reading a file
// holds its live entries, the record being read, and at most one more
// record's bytes.
//
// No call takes a context: each one is local disk I/O that must run to its
// end once begun (an fsync given up halfway leaves the state unknown).
package tails
