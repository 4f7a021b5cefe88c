package capture

import (
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3/vfs"

	"github.com/framectl/framectl/internal/captured"
)

// Name is the name the capture VFS is registered under, process-wide, the
// first time a database is attached: connections open an attached
// database with "?vfs=framectl" (URI).
const Name = "framectl"

var (
	registerOnce sync.Once
	processVFS   *captureVFS
)

// process returns the process-wide capture VFS, registering it once.
// SQLite finds a VFS by name, and all connections to a database must share
// one capture state (walstate.go), so there is one per process.
func process() *captureVFS {
	registerOnce.Do(func() { processVFS = registerCaptureVFS(Name) })
	return processVFS
}

// Options say where an attached database's commits go and where its pages
// come from.
type Options struct {
	// Sink receives every commit of the database (required).
	Sink captured.Sink
	// Pages, when set, supplies the pages the local file does not hold
	// (pages.go); nil means the local file holds every page.
	Pages captured.PageSource
	// PageSize is the database's page size, required with Pages: the local
	// file's header may be one of the pages it lacks.
	PageSize uint32
	// PageTimeout bounds how long a read waits for Pages to fetch a page
	// (default DefaultPageTimeout): VFS callbacks carry no context, so the
	// capture gives ReadPage one that ends then.
	PageTimeout time.Duration
}

// DefaultPageTimeout is Options.PageTimeout's default: long enough for a
// chunk's GET from a slow bucket, short enough that a statement fails
// rather than hang when the bucket is gone.
const DefaultPageTimeout = 10 * time.Second

// Attach puts the database at path under capture: from now on, connections
// may open it through the capture VFS (URI(path, Name)), and every commit
// they make is handed to opts.Sink. The returned detach undoes it
// (idempotent); connections to the database must be closed first, since
// afterwards their WAL writes are refused (ReasonDetached) and the sink is
// never called again.
//
// path is canonicalised the way SQLite names the database (fullPath), so
// any spelling of it works.
//
// Precondition, checked here and again when the first connection opens the
// WAL: the file exists, is in WAL mode, and its WAL is absent or empty
// (Prepare makes it so). The capture must see every WAL write from the
// first one on; WAL frames already in the WAL would be commits it never
// saw. Content written before (the initial switch to WAL included)
// bypasses the WAL and is not captured: a session starts from a snapshot
// of the file as Attach found it.
func Attach(path string, opts Options) (detach func(), err error) {
	return process().attach(path, opts)
}

// URI returns the SQLite URI of the database file at path opened through
// the VFS named vfsName, with extra URI parameters ("psow=0",
// "_pragma=busy_timeout(10000)").
func URI(path, vfsName string, params ...string) string {
	u := fileURI(path, vfsName)
	for _, p := range params {
		u += "&" + p
	}
	return u
}

// registerCaptureVFS creates a capture VFS over the os VFS and registers
// it under name, for connections opened with "?vfs=<name>".
func registerCaptureVFS(name string) *captureVFS {
	v := newCaptureVFS(nil)
	vfs.Register(name, v)
	return v
}
