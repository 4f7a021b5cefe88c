package vfs

import (
	"errors"
	"fmt"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/vfs"
)

// Why a write failed, as the error a write returns.
//
// A VFS method that fails hands go-sqlite3 a Go error, but go-sqlite3 keeps
// it only until the connection's next VFS call (vfs/vfs.go vfsErrorCode sets
// Wrapper.SysError on every call, to nil on success), and SQLite makes
// several of them (WAL and shared-memory unlocks) between a failed xWrite
// and the moment the statement returns. So the Go error of a refused write
// never reaches the application. The extended result code does: SQLite
// returns the code xWrite gave it, unchanged. Each reason therefore has its
// own extended I/O error code, past SQLite's own (which end at
// SQLITE_IOERR_IN_PAGE, 34<<8), and Refusal turns the code back into the
// error the rest of this package uses.
const (
	codeFenced       = sqlite3.ExtendedErrorCode(sqlite3.IOERR) | 0xF1<<8
	codeBackpressure = sqlite3.ExtendedErrorCode(sqlite3.IOERR) | 0xF2<<8
	codeStopped      = sqlite3.ExtendedErrorCode(sqlite3.IOERR) | 0xF3<<8
	codeClosed       = sqlite3.ExtendedErrorCode(sqlite3.IOERR) | 0xF4<<8
	codeSyncTimeout  = sqlite3.ExtendedErrorCode(sqlite3.IOERR) | 0xF5<<8
)

// refusals maps each code to the error it stands for, most specific first
// (a stop for a fence is ErrFenced, not ErrStopped).
var refusals = []struct {
	code sqlite3.ExtendedErrorCode
	err  error
}{
	{codeFenced, ErrFenced},
	{codeBackpressure, ErrBackpressure},
	{codeSyncTimeout, ErrSyncTimeout},
	{codeClosed, ErrClosed},
	{codeStopped, ErrStopped},
}

// Refusal tells why replication refused a write: for an error returned by a
// statement on a replicated database (through go-sqlite3 or database/sql),
// it returns an error matching ErrFenced, ErrBackpressure, ErrSyncTimeout,
// ErrClosed or ErrStopped, wrapping err; for any other error, nil.
//
//	if _, err := db.ExecContext(ctx, "INSERT ..."); errors.Is(vfs.Refusal(err), vfs.ErrBackpressure) {
//		// the bucket is behind: shed load, retry later
//	}
//
// A refused write changed nothing; the transaction it belonged to is rolled
// back. A Sync commit that fails with ErrSyncTimeout or ErrFenced is the
// exception: it is in the local database, not confirmed durable (see Sync).
func Refusal(err error) error {
	var code sqlite3.ExtendedErrorCode
	if !errors.As(err, &code) {
		return nil
	}
	for _, r := range refusals {
		if code == r.code {
			return fmt.Errorf("%w: %w", r.err, err)
		}
	}
	return nil
}

// refusalCode is the code a write refused with err fails with.
func refusalCode(err error) sqlite3.ExtendedErrorCode {
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	var ce *captureError
	if errors.As(err, &ce) && ce.Kind != errRefused {
		return codeStopped // this very write broke replication
	}
	return sqlite3.IOERR_WRITE
}

// ioError makes SQLite fail a write with the code of its reason
// (refusalCode); go-sqlite3 also attaches err itself for as long as it
// keeps it (see above).
func ioError(err error) error { return vfs.SystemError(err, refusalCode(err)) }
