package framectl

import (
	"errors"
	"fmt"

	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/session"
)

// A refused write fails its statement with SQLite's I/O error, and the Go
// error is lost on the way (capture/refusal.go says why); the extended
// result code survives, and carries a reason. refusals gives each error a
// session refuses writes with its reason, most specific first (a stop for
// a fence is ErrFenced, not ErrStopped). The numbers are part of the API:
// an application sees them as SQLITE_IOERR | (0xF0+reason)<<8. A write the
// capture itself refuses carries capture.ReasonBroken (the capture met a
// write it cannot account for: the session stopped) or
// capture.ReasonDetached (the database was closed).
var refusals = []struct {
	reason capture.Reason
	err    error
}{
	{1, session.ErrFenced},
	{2, session.ErrBackpressure},
	{5, session.ErrSyncTimeout},
	{capture.ReasonDetached, session.ErrClosed},
	{capture.ReasonBroken, session.ErrStopped},
}

// refuse gives err the reason of the first refusal it matches; nil stays
// nil, and an error matching none is refused without a reason.
func refuse(err error) error {
	if err == nil {
		return nil
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return capture.Refuse(r.reason, err)
		}
	}
	return err
}

// Refusal tells why replication refused a write: for an error returned by a
// statement on a replicated database (through go-sqlite3 or database/sql),
// it returns an error matching session.ErrFenced, ErrBackpressure,
// ErrSyncTimeout, ErrClosed or ErrStopped, wrapping err; for any other
// error, nil.
//
//	if _, err := db.ExecContext(ctx, "INSERT ..."); errors.Is(framectl.Refusal(err), session.ErrBackpressure) {
//		// the bucket is behind: shed load, retry later
//	}
//
// A refused write changed nothing; the transaction it belonged to is rolled
// back. A Sync commit that fails with ErrSyncTimeout or ErrFenced is the
// exception: it is in the local database, not confirmed durable (see
// session.Sync).
func Refusal(err error) error {
	reason, ok := capture.ReasonOf(err)
	if !ok {
		return nil
	}
	for _, r := range refusals {
		if reason == r.reason {
			return fmt.Errorf("%w: %w", r.err, err)
		}
	}
	return nil
}
