package restore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/frames"
)

// maxIntegrityMessages bounds what IntegrityCheck reports of SQLite's
// answer: the first few problems say what is wrong; a thousand more add
// nothing.
const maxIntegrityMessages = 10

// IntegrityCheck runs PRAGMA integrity_check on the database file at path
// and returns an error matching ErrIntegrity, with SQLite's first
// messages, unless it answers "ok". The error matches frames.ErrCorrupt
// too: a database that SQLite finds damaged is damaged content, whatever
// checks it passed on the way.
//
// The file is opened read-only with immutable=1, through a VFS of this
// package that reads ahead (integrityvfs.go): SQLite then takes no locks,
// creates no -wal or -shm beside the file and never writes it, so checking
// a file changes nothing about it, even when its header says WAL mode (a
// restored database is in WAL mode, without a WAL).
func IntegrityCheck(ctx context.Context, path string) error {
	return integrityCheck(ctx, path, integrityVFSName)
}

// integrityCheck is IntegrityCheck through the VFS named vfsName
// (BenchmarkIntegrityCheck compares it with go-sqlite3's "os").
func integrityCheck(ctx context.Context, path, vfsName string) error {
	u := url.URL{Scheme: "file", Path: path, RawQuery: url.Values{"vfs": {vfsName}, "mode": {"ro"}, "immutable": {"1"}}.Encode()}
	c, err := sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	if err != nil {
		return integrityError(fmt.Sprintf("opening %s", path), err)
	}
	defer c.Close()
	c.SetInterrupt(ctx)
	s, _, err := c.Prepare("PRAGMA integrity_check")
	if err != nil {
		// Preparing reads the schema, and an interrupt stops it too: a
		// cancelled check is not a damaged database.
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return integrityError(path, err)
	}
	defer s.Close()
	var msgs []string
	rows := 0
	for s.Step() {
		rows++
		if len(msgs) < maxIntegrityMessages {
			msgs = append(msgs, s.ColumnText(0))
		}
	}
	if err := s.Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return integrityError(path, err)
	}
	if rows == 1 && msgs[0] == "ok" {
		return nil
	}
	more := ""
	if rows > len(msgs) {
		more = fmt.Sprintf(" (and %d more)", rows-len(msgs))
	}
	return integrityError(fmt.Sprintf("%s: %s%s", path, strings.Join(msgs, "; "), more), nil)
}

// integrityError matches ErrIntegrity, frames.ErrCorrupt and cause.
func integrityError(msg string, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: %s: %w (%w)", ErrIntegrity, msg, cause, frames.ErrCorrupt)
	}
	return fmt.Errorf("%w: %s (%w)", ErrIntegrity, msg, frames.ErrCorrupt)
}
