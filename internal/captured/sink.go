package captured

// Sink receives what the capture sees of one database: the replication
// session in production, recording sinks in the capture's tests. Every
// method runs on SQLite's goroutine, inside a VFS callback, with no
// context: none may block on the network unless the mode says so
// (Writable under backpressure, PhaseTwo in Sync mode).
type Sink interface {
	// Writable is called before every write to the WAL that starts or
	// extends a transaction. A non-nil error refuses the write (SQLite
	// reports an I/O error and the transaction fails), so a database whose
	// replication has stopped takes no commit it could not ship.
	Writable() error
	// Commit receives a commit, in order, while SQLite holds the WAL write
	// lock. The commit is already in the local WAL when this runs; the sink
	// owns it and must Release it when done.
	Commit(c *Commit)
	// Broken reports that the capture met a write it cannot account for
	// (a gap in the WAL, a foreign writer, a malformed header). Replication
	// must stop: the bucket would otherwise diverge from the database.
	Broken(err error)
	// PhaseTwo is called when a committing connection's transaction is
	// over, unless replication has halted. It runs after SQLite released
	// the WAL write lock, so it may hold the committing statement (Sync
	// mode waits here for the upload) while other connections commit, and
	// its error fails that statement. SQLite sends FCNTL_COMMIT_PHASETWO
	// after sqlite3WalEndWriteTransaction (pager.c pager_end_transaction)
	// for every committed write transaction, including one that wrote no
	// WAL frame. A sink with nothing to wait for returns nil.
	PhaseTwo() error
}

// Attachment is what the layer above gives the capture to attach a
// database file with (capture.Local.Attach): where its commits go, and
// where the pages its local file lacks come from.
type Attachment struct {
	// Sink receives every commit of the file.
	Sink Sink
	// Pages, when set, supplies the pages the local file does not hold
	// (a lazy open), of PageSize bytes; nil: the file holds them all.
	// How long a read may wait on it is the capture's option
	// (capture.Options.PageTimeout), not the attachment's: a session that
	// plugs in a lazy source will want to set it per attachment.
	Pages    PageSource
	PageSize uint32
}
