// Package capture owns the SQLite side of framectl: a VFS over go-sqlite3's
// "os" VFS that watches the WAL of every attached database and turns each
// commit into a captured.Commit of the pages it wrote, handed to the
// database's Sink (the replication session); that refuses the writes its
// sink cannot take, with a Reason the application can read back
// (ReasonOf); and that reads the pages a local file does not hold from a
// captured.PageSource (pages.go), the seam a lazy open or a read replica
// plugs into. Prepare puts a database file in the state capture starts
// from.
//
// It knows SQLite's files (the WAL and its frames, the database header, the
// locks and file controls go-sqlite3 passes through) and nothing of
// buckets, fencing, followers, restore or compaction: within the module it
// imports frames and internal packages only.
//
// How it sees commits: vfs.go opens files; the main database file
// (mainfile.go) may be written only during a checkpoint; every write to the
// WAL (wal.go) is classified against what the database's shared state
// (walstate.go) knows of the WAL, so that each transaction is placed
// without reading the WAL back and anything this process did not write is
// noticed. The WAL format is drawn in walformat.go; what SQLite writes, and
// when, is in testdata/wal-trace.txt. Every optional file interface is
// forwarded (passthrough.go), or WAL mode silently turns off.
//
// What it must never do: emit a page of a rolled-back transaction, emit a
// commit twice or out of order, skip a commit, let a write it cannot
// account for reach the database file or pass unreported (the sink is told
// it is Broken, and every later write is refused), or block a VFS callback
// on anything but its sink and page source.
package capture
