package capture

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/framectl/framectl/internal/captured"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/vfs"
	"github.com/stretchr/testify/require"
)

var capRegistered atomic.Int64

// capRegister registers a fresh capture VFS under a unique name.
func capRegister(t testing.TB) (*captureVFS, string) {
	t.Helper()
	name := fmt.Sprintf("framectl-cap-test-%d", capRegistered.Add(1))
	v := registerCaptureVFS(name)
	t.Cleanup(func() { vfs.Unregister(name) })
	return v, name
}

// capPrepare makes path a WAL database ready to attach, the way the entry
// point does: a plain connection (os VFS) sets the page size and WAL mode,
// runs prep, checkpoints the WAL away and closes (deleting the WAL).
func capPrepare(t testing.TB, path string, pageSize int, prep string) {
	t.Helper()
	c, err := sqlite3.Open("file:" + path + "?vfs=os")
	require.NoError(t, err)
	dbtest.Exec(t, c, fmt.Sprintf("PRAGMA page_size=%d", pageSize))
	require.Equal(t, "wal", dbtest.Query1(t, c, "PRAGMA journal_mode=WAL"), "prepare: journal_mode")
	if prep != "" {
		dbtest.Exec(t, c, prep)
	}
	_, _, err = c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// capSetup prepares a database with a table, attaches it, and returns the
// VFS, its name, the sink and the path.
func capSetup(t *testing.T) (v *captureVFS, vfsName string, s *capSink, path string) {
	t.Helper()
	return capSetupWith(t, 4096, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
}

// capSetupWith is capSetup for a database of pageSize bytes a page that
// prep prepares (capPrepare), with a sink replicating it from its first
// state.
func capSetupWith(t *testing.T, pageSize int, prep string) (v *captureVFS, vfsName string, s *capSink, path string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "db.sqlite")
	capPrepare(t, path, pageSize, prep)
	v, vfsName = capRegister(t)
	s = newCapSink(t, filepath.Join(dir, "replica.sqlite"), dbtest.FileBytes(t, path))
	capAttach(t, v, path, s)
	return v, vfsName, s, path
}

// capAttach attaches path to v with s, detaching at cleanup.
func capAttach(t testing.TB, v *captureVFS, path string, s captured.Sink) func() {
	t.Helper()
	detach, err := v.attach(path, Options{Sink: s})
	require.NoError(t, err)
	t.Cleanup(detach)
	return detach
}

// capOpen opens path through the named VFS; params are extra URI
// parameters ("psow=0").
func capOpen(t testing.TB, vfsName, path string, params ...string) *sqlite3.Conn {
	t.Helper()
	c, err := capOpenErr(vfsName, path, params...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.BusyTimeout(10e9))
	return c
}

func capOpenErr(vfsName, path string, params ...string) (*sqlite3.Conn, error) {
	uri := "file:" + path + "?vfs=" + vfsName
	for _, p := range params {
		uri += "&" + p
	}
	return sqlite3.Open(uri)
}

// capDigest summarises every row of every table and the schema.
func capDigest(t testing.TB, c *sqlite3.Conn) string {
	t.Helper()
	h := sha256.New()
	rows := 0
	tables := []string{"sqlite_schema"}
	s, _, err := c.Prepare("SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name")
	require.NoError(t, err)
	for s.Step() {
		tables = append(tables, s.ColumnText(0))
	}
	s.Close()
	for _, tbl := range tables {
		s, _, err := c.Prepare("SELECT * FROM " + tbl + " ORDER BY 1")
		require.NoError(t, err)
		for s.Step() {
			rows++
			for i := range s.ColumnCount() {
				fmt.Fprintf(h, "%q\x00", s.ColumnRawText(i))
			}
		}
		require.NoError(t, s.Err())
		s.Close()
	}
	return fmt.Sprintf("%d rows sha256:%x", rows, h.Sum(nil)[:8])
}

// capSink is a test sink: it rebuilds a replica file from the commits it
// receives (pages written, file cut to the database size), checks each
// captured.Commit's invariants, and records what the capture reported.
type capSink struct {
	t       testing.TB
	replica *os.File

	mu         sync.Mutex
	commits    int
	pagesTotal int
	lastTime   int64
	pageSize   uint32
	dbPages    uint32 // replica size in pages
	// growthUnwritten counts pages a commit added to the database without
	// writing them (they read as zeros on the replica).
	growthUnwritten int
	brokenErrs      []error
	firstBadCommit  string

	inCommit, maxInCommit atomic.Int32
	notWritable           atomic.Pointer[error]
	writableCalls         atomic.Int64
	phaseTwoErr           atomic.Pointer[error] // what phaseTwo returns
	phaseTwos             atomic.Int64
}

func newCapSink(t testing.TB, replicaPath string, base []byte) *capSink {
	t.Helper()
	f, err := os.Create(replicaPath)
	require.NoError(t, err)
	_, err = f.Write(base)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return &capSink{t: t, replica: f}
}

func (s *capSink) Writable() error {
	s.writableCalls.Add(1)
	if p := s.notWritable.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *capSink) PhaseTwo() error {
	s.phaseTwos.Add(1)
	if p := s.phaseTwoErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *capSink) Broken(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.brokenErrs = append(s.brokenErrs, err)
}

func (s *capSink) Commit(c *captured.Commit) {
	n := s.inCommit.Add(1)
	for m := s.maxInCommit.Load(); n > m && !s.maxInCommit.CompareAndSwap(m, n); m = s.maxInCommit.Load() {
	}
	defer s.inCommit.Add(-1)
	defer c.Release()

	s.mu.Lock()
	defer s.mu.Unlock()
	bad := func(format string, args ...any) {
		if s.firstBadCommit == "" {
			s.firstBadCommit = fmt.Sprintf("commit %d: ", s.commits+1) + fmt.Sprintf(format, args...)
		}
	}
	if len(s.brokenErrs) > 0 {
		bad("commit after broken")
	}
	if s.pageSize == 0 {
		s.pageSize = c.PageSize
		if fi, err := s.replica.Stat(); err == nil {
			s.dbPages = uint32(fi.Size() / int64(c.PageSize))
		}
	}
	if c.PageSize != s.pageSize {
		bad("page size %d, was %d", c.PageSize, s.pageSize)
	}
	if c.CommitTime < s.lastTime || c.CommitTime == 0 {
		bad("commit time %d after %d", c.CommitTime, s.lastTime)
	}
	s.lastTime = c.CommitTime
	if len(c.Pages) == 0 {
		bad("no pages")
	}
	written := 0
	for i, p := range c.Pages {
		if p.Number == 0 || p.Number > c.DatabasePages || (i > 0 && p.Number <= c.Pages[i-1].Number) {
			bad("page %d (of %d pages, previous %d)", p.Number, c.DatabasePages, c.Pages[max(i-1, 0)].Number)
		}
		if len(p.Data) != int(c.PageSize) {
			bad("page %d has %d bytes", p.Number, len(p.Data))
		}
		if _, err := s.replica.WriteAt(p.Data, int64(p.Number-1)*int64(c.PageSize)); err != nil {
			bad("replica: %v", err)
		}
		if p.Number > s.dbPages {
			written++
		}
	}
	if c.DatabasePages > s.dbPages {
		s.growthUnwritten += int(c.DatabasePages-s.dbPages) - written
	}
	if err := s.replica.Truncate(int64(c.DatabasePages) * int64(c.PageSize)); err != nil {
		bad("replica: %v", err)
	}
	s.dbPages = c.DatabasePages
	s.commits++
	s.pagesTotal += len(c.Pages)
}

func (s *capSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

func (s *capSink) brokenErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.brokenErrs...)
}

// check fails the test over any invariant a commit broke.
func (s *capSink) check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstBadCommit != "" {
		t.Error(s.firstBadCommit)
	}
	if m := s.maxInCommit.Load(); m > 1 {
		t.Errorf("%d commits were handed to the sink at once", m)
	}
}

// replicaBytes returns the replica's content.
func (s *capSink) replicaBytes(t testing.TB) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return dbtest.FileBytes(t, s.replica.Name())
}

// capCountSink counts commits and releases them at once.
type capCountSink struct {
	n     atomic.Int64
	pages atomic.Int64
}

func (s *capCountSink) Writable() error { return nil }
func (s *capCountSink) PhaseTwo() error { return nil }
func (s *capCountSink) Broken(error)    {}
func (s *capCountSink) Commit(c *captured.Commit) {
	s.n.Add(1)
	s.pages.Add(int64(len(c.Pages)))
	c.Release()
}
