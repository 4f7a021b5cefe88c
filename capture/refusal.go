package capture

import (
	"errors"
	"fmt"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/vfs"
)

// Why a file operation failed on purpose, as the error a statement returns.
//
// A VFS method that fails hands go-sqlite3 a Go error, but go-sqlite3 keeps
// it only until the connection's next VFS call (vfs/vfs.go vfsErrorCode sets
// Wrapper.SysError on every call, to nil on success), and SQLite makes
// several of them (WAL and shared-memory unlocks) between a failed xWrite
// and the moment the statement returns. So the Go error of a refused write
// never reaches the application. The extended result code does: SQLite
// returns the code xWrite (or xRead) gave it, unchanged. A refusal
// therefore carries a Reason, a small number the capture turns into an
// extended I/O error code past SQLite's own (which end at
// SQLITE_IOERR_IN_PAGE, 34<<8): SQLITE_IOERR | (0xF0+reason)<<8. ReasonOf
// turns a statement's error back into the reason.
//
// What each number means is up to whoever refuses (a Sink's Writable and
// PhaseTwo, a PageSource's ReadPage), except the two the capture uses for
// refusals of its own, ReasonBroken and ReasonDetached.

// Reason is why the capture, its sink or its page source refused an
// operation; 1 to 15. The value 0 is no reason.
type Reason uint8

// The capture's own reasons.
const (
	// ReasonBroken: the capture met a write it cannot account for (this
	// one, or an earlier one), and refuses every write from then on.
	ReasonBroken Reason = 3
	// ReasonDetached: the database was detached from the capture (its
	// replication closed) while a connection still had it open.
	ReasonDetached Reason = 4
)

// maxReason bounds a Reason: 0xF0+15 is the highest byte the code's
// second byte can hold.
const maxReason = 15

// Refuse returns err carrying reason r, for a Sink or PageSource to refuse
// an operation with: the statement then fails with r's code (ReasonOf). A
// reason outside 1..15 is none: the statement fails with a plain I/O error.
func Refuse(r Reason, err error) error { return &refused{reason: r, err: err} }

type refused struct {
	reason Reason
	err    error
}

func (e *refused) Error() string {
	if e.err == nil {
		return fmt.Sprintf("capture: refused (reason %d)", e.reason)
	}
	return e.err.Error()
}

func (e *refused) Unwrap() error { return e.err }

// ReasonOf returns the reason a statement on a database attached to the
// capture failed with (an error returned through go-sqlite3 or
// database/sql), and false when it did not fail by a refusal.
func ReasonOf(err error) (Reason, bool) {
	var code sqlite3.ExtendedErrorCode
	if !errors.As(err, &code) || sqlite3.ErrorCode(code) != sqlite3.IOERR {
		return 0, false
	}
	hi := uint16(code) >> 8
	if hi <= 0xF0 || hi > 0xF0+maxReason {
		return 0, false
	}
	return Reason(hi - 0xF0), true
}

// reasonOf is the reason err carries, 0 if none.
func reasonOf(err error) Reason {
	var r *refused
	if errors.As(err, &r) && r.reason >= 1 && r.reason <= maxReason {
		return r.reason
	}
	var ce *captureError
	if errors.As(err, &ce) && ce.Kind != errRefused {
		return ReasonBroken // this very write broke replication
	}
	return 0
}

// code is the extended code of reason r.
func (r Reason) code() sqlite3.ExtendedErrorCode {
	return sqlite3.ExtendedErrorCode(sqlite3.IOERR) | sqlite3.ExtendedErrorCode(0xF0+uint16(r))<<8
}

// ioError makes SQLite fail a write with the code of its reason, or
// SQLITE_IOERR_WRITE; go-sqlite3 also attaches err itself for as long as
// it keeps it (see above).
func ioError(err error) error {
	if r := reasonOf(err); r != 0 {
		return vfs.SystemError(err, r.code())
	}
	return vfs.SystemError(err, sqlite3.IOERR_WRITE)
}

// readError makes SQLite fail a read of a page its source could not give
// with the code of the source's reason, or SQLITE_IOERR_READ.
func readError(err error) error {
	var r *refused
	if errors.As(err, &r) && r.reason >= 1 && r.reason <= maxReason {
		return vfs.SystemError(err, r.reason.code())
	}
	return vfs.SystemError(err, sqlite3.IOERR_READ)
}
