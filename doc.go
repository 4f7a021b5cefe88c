// Package framectl opens replicated SQLite databases: Open is the one entry
// point an actor runtime (or any program) calls, and DB the database it
// gets. It is the wiring of two layers, and owns nothing else:
//
//   - package capture, the SQLite side: a VFS that captures every commit of
//     an attached database and refuses the writes replication cannot take;
//   - package session, the replication session: the claim, the local copy
//     brought up to date, batching, uploads, acknowledgement by the bucket
//     or by followers, compaction, the state file, Close and release.
//
// Open gives session.Open the capture's side of the file (local.go), and
// Refusal reads back why a write was refused (refusal.go). Configuration,
// statistics, errors and modes are the session's (session.Config,
// session.Stats, session.ErrFenced, session.Sync); what a DB does beyond
// its session is SQLite's: DSN and Conn open connections through the
// capture.
//
// What it must never do: open a database file through the capture without
// a session to take its commits, or take a decision that belongs to either
// layer.
package framectl
