// Package vfs owns capture and replication of a SQLite database: a VFS that
// wraps go-sqlite3's "os" VFS and turns every WAL commit into a frame of the
// pages it wrote, the replicator that batches frames and uploads them to a
// bucket, durable acknowledgement (Durable, sync mode), and the entry point
// an actor runtime calls to open a replicated database.
//
// What it must never do: emit a page of a rolled-back transaction, emit a
// commit twice or out of order, skip a frame, acknowledge a commit that is
// not in the bucket, block a VFS callback on the network in async mode, or go
// on replicating after it has seen a write it cannot account for.
package vfs
