package captured

import "context"

// PageSource supplies the pages of an attached database that its local
// file does not hold yet: a database served while it is fetched from the
// bucket (a lazy open), a read replica. It is the seam between the SQLite
// side, which only knows that a page is missing, and whoever knows where
// the page is (a chunk of a manifest, a batch of the log).
//
// With a source (capture.Options.Pages) the capture asks it about every
// page a read of the main database file touches: a page the local file
// holds is read from the file, any other from the source. Reads of the WAL never involve
// it: a page in the WAL is newer than anything the source has. The local
// file keeps the database's size, sparse where pages are missing, so that
// SQLite's xFileSize stays true.
//
// A source must be safe for concurrent use: every connection to the
// database reads through it.
type PageSource interface {
	// Local reports whether the local file holds page pgno (1-based) as
	// the database now is. It is called for every page read, on SQLite's
	// goroutine: it must answer at once, without I/O.
	Local(pgno uint32) bool
	// ReadPage fills p, exactly one page, with page pgno. It may block on
	// a fetch, until ctx ends: VFS callbacks carry no context, so the
	// capture gives it one that ends after capture.Options.PageTimeout. An error
	// fails the read, and the statement with it: it should name what it
	// could not read (the object key, and why), and may carry a reason
	// (capture.Refuse) for the application to tell it apart
	// (capture.ReasonOf); without one
	// the statement fails with SQLITE_IOERR_READ.
	ReadPage(ctx context.Context, pgno uint32, p []byte) error
	// Stored tells the source that the capture wrote page pgno into the
	// local file (a checkpoint copying the WAL back): from now on the file
	// holds the page's newest version, and Local must say so. It is called
	// after the write, before the checkpoint completes, with no lock held.
	Stored(pgno uint32)
}
