// Package vfs owns capture and replication of a SQLite database: a VFS that
// wraps go-sqlite3's "os" VFS and turns every WAL commit into a frame of the
// pages it wrote, the replicator that batches frames and uploads them to a
// bucket, durable acknowledgement (Durable, sync mode), and the entry point
// an actor runtime calls to open a replicated database.
//
// A session starts at Open and ends at Close (or when the database stops:
// fenced, node lost, replication broken). Open decides what the session
// starts from with the local state file beside the database (state.go) and
// the bucket's listing: the local copy when it is current, the bucket's
// newest state otherwise; never an older state than the state file or
// own.json says the bucket holds (ErrListingBehind), and never by deleting
// a local copy that may hold commits the bucket lacks (kept, discarded or
// moved aside: Config.Unacknowledged, Stats.Start). Reopen starts the next
// session in the same process after the node stopped. Close records where
// the session ended in own.json, so that a lost tail is an error, not an
// older state.
//
// What it must never do: emit a page of a rolled-back transaction, emit a
// commit twice or out of order, skip a frame, acknowledge a commit that is
// not in the bucket, block a VFS callback on the network in async mode, go
// on replicating after it has seen a write it cannot account for, or start
// a session from a state older than one the bucket acknowledged.
package vfs
