package capture

import (
	"context"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/internal/captured"
)

// Local is the capture's side of a database file as a replication session
// needs it (session.Local): Prepare, PageSize, and Attach on the process's
// capture VFS. Its refusals carry whatever reasons its sink's errors carry.
type Local struct{}

// Prepare is the package's Prepare.
func (Local) Prepare(ctx context.Context, path string, pageSize int) error {
	return Prepare(ctx, path, pageSize)
}

// PageSize is the package's PageSize.
func (Local) PageSize(path string) (uint32, error) { return PageSize(path) }

// Attach is the package's Attach with a's sink and page source.
func (Local) Attach(path string, a captured.Attachment) (func(), error) {
	return Attach(path, Options{Sink: a.Sink, Pages: a.Pages, PageSize: a.PageSize})
}

// busyTimeout is how long a connection from Conn or DSN waits on a lock
// another connection holds before its statement fails with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// DSN returns a data source name for database/sql with go-sqlite3's driver
// for the attached database at path, through the capture VFS, with a 10 s
// busy timeout.
func DSN(path string) string {
	return URI(path, Name, fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()))
}

// Conn opens a connection to the attached database at path through the
// capture VFS, with a 10 s busy timeout; params are extra URI parameters
// ("psow=0").
func Conn(path string, params ...string) (*sqlite3.Conn, error) {
	c, err := sqlite3.Open(URI(path, Name, params...))
	if err != nil {
		return nil, err
	}
	if err := c.BusyTimeout(busyTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
