package capture

import (
	"errors"
	"fmt"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/vfs"
)

// Kinds of capture error. Each reported error is a *captureError whose Kind
// is one of these; match with errors.Is.
var (
	// errNotReplicated: a main database was opened through the capture VFS
	// without being attached. Nothing may write a replicated-looking file
	// uncaptured.
	errNotReplicated = errors.New("database is not under replication")
	// errAttached: attach was called twice for one database.
	errAttached = errors.New("database is already attached")
	// errNotPrepared: attach or the first open found a database that is not
	// ready for capture (not in WAL mode, a WAL with content, page checksums).
	errNotPrepared = errors.New("database not prepared for capture")
	// errFrameGap: a transaction does not start where the last commit
	// ended, or a committed WAL frame was overwritten: another writer
	// appended or rewrote WAL frames this process did not see.
	errFrameGap = errors.New("WAL frame gap")
	// errGeneration: a WAL header or WAL frame belongs to a WAL generation
	// whose start this process did not see.
	errGeneration = errors.New("unexpected WAL generation")
	// errMalformedWrite: a write to the WAL that SQLite does not make
	// (spanning WAL frames, a partial header, a page number of zero).
	errMalformedWrite = errors.New("unexpected WAL write")
	// errForeignWrite: the main database file was written outside a
	// checkpoint, so the database is not (or no longer) in WAL mode.
	errForeignWrite = errors.New("database file written outside a checkpoint")
	// errRefused: a WAL write was refused because replication is broken,
	// detached or not writable; the cause is wrapped.
	errRefused = errors.New("write refused: replication cannot take it")
	// errPageSource: a page the local file lacks could not be had from
	// the page source; its error is wrapped.
	errPageSource = errors.New("page source")
	// errDetached: the cause of a write refused after detach.
	errDetached = errors.New("database detached")
)

// captureError is what the capture reports and returns: the file it
// concerns, the WAL frame if any, the kind, details, and an optional cause.
type captureError struct {
	Path     string
	WALFrame uint32 // 1-based index of SQLite's WAL frame; 0 if not about one
	Kind     error
	Msg      string
	Err      error // cause, may be nil
}

func (e *captureError) Error() string {
	s := "capture: " + e.Path
	if e.WALFrame != 0 {
		s += fmt.Sprintf(": WAL frame %d", e.WALFrame)
	}
	s += ": " + e.Kind.Error()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *captureError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// cantOpen makes SQLite fail an open with SQLITE_CANTOPEN, err attached.
func cantOpen(err error) error { return vfs.SystemError(err, sqlite3.CANTOPEN) }
