package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/internal/dbtest"
)

// memSource is a page source over a database image in memory: a page is
// local once the test says so or the capture Stored it.
type memSource struct {
	image    []byte
	pageSize int

	mu      sync.Mutex
	local   map[uint32]bool
	fetched map[uint32]int // ReadPage calls by page
	stored  map[uint32]int // Stored calls by page
	fail    map[uint32]error
	block   bool // ReadPage waits for its context to end
	ctxErr  error
}

func newMemSource(image []byte, pageSize int) *memSource {
	return &memSource{image: image, pageSize: pageSize, local: map[uint32]bool{},
		fetched: map[uint32]int{}, stored: map[uint32]int{}, fail: map[uint32]error{}}
}

func (s *memSource) Local(pgno uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local[pgno]
}

func (s *memSource) ReadPage(ctx context.Context, pgno uint32, p []byte) error {
	s.mu.Lock()
	s.fetched[pgno]++
	err, block := s.fail[pgno], s.block
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		s.mu.Lock()
		s.ctxErr = ctx.Err()
		s.mu.Unlock()
		return fmt.Errorf("chunk for page %d: %w", pgno, ctx.Err())
	}
	if err != nil {
		return err
	}
	off := int(pgno-1) * s.pageSize
	if len(p) != s.pageSize || off+s.pageSize > len(s.image) {
		return fmt.Errorf("page %d: not in an image of %d bytes (asked for %d)", pgno, len(s.image), len(p))
	}
	copy(p, s.image[off:])
	return nil
}

func (s *memSource) Stored(pgno uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stored[pgno]++
	s.local[pgno] = true
}

func (s *memSource) counts() (fetched, stored map[uint32]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, st := map[uint32]int{}, map[uint32]int{}
	for k, v := range s.fetched {
		f[k] = v
	}
	for k, v := range s.stored {
		st[k] = v
	}
	return f, st
}

// pagesFixture is a database of many pages, prepared for attach, and a
// sparse local copy of it holding only page 1: what a lazy open starts
// from.
type pagesFixture struct {
	image    []byte // the whole database
	orig     string // its file, with every page
	local    string // the sparse copy
	pageSize int
}

func newPagesFixture(t *testing.T) pagesFixture {
	t.Helper()
	const pageSize = 4096
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.sqlite")
	capPrepare(t, orig, pageSize, `CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
		INSERT INTO t(v) SELECT randomblob(900) FROM generate_series(1, 400);`)
	image := dbtest.FileBytes(t, orig)
	require.Greater(t, len(image)/pageSize, 50, "the fixture spans many pages")
	local := filepath.Join(dir, "db.sqlite")
	f, err := os.Create(local)
	require.NoError(t, err)
	_, err = f.WriteAt(image[:pageSize], 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(len(image)))) // sparse: the rest reads as zeros
	require.NoError(t, f.Close())
	return pagesFixture{image: image, orig: orig, local: local, pageSize: pageSize}
}

// TestPageSourceServesMissingPages: a database whose local file holds only
// page 1 reads exactly like the whole database through a page source; the
// source is asked only for pages the file lacks, and a checkpoint's writes
// make their pages local (Stored), after which the file serves them and
// the source's older copy is never read again.
func TestPageSourceServesMissingPages(t *testing.T) {
	fx := newPagesFixture(t)
	v, name := capRegister(t)
	src := newMemSource(fx.image, fx.pageSize)
	src.local[1] = true
	s := newCapSink(t, filepath.Join(t.TempDir(), "replica.sqlite"), fx.image)
	detach, err := v.attach(fx.local, Options{Sink: s, Pages: src, PageSize: uint32(fx.pageSize)})
	require.NoError(t, err)
	defer detach()

	plain, err := sqlite3.Open("file:" + fx.orig + "?vfs=os")
	require.NoError(t, err)
	defer plain.Close()
	c := capOpen(t, name, fx.local)
	require.Equal(t, capDigest(t, plain), capDigest(t, c), "rows read through the page source")
	fetched, _ := src.counts()
	require.NotEmpty(t, fetched, "pages fetched")
	assert.Zero(t, fetched[1], "page 1 is local: never fetched")

	// The same writes on the whole database and through the source.
	const writes = `UPDATE t SET v = randomblob(900) WHERE id % 7 = 0; INSERT INTO t(v) SELECT randomblob(500) FROM generate_series(1, 50)`
	dbtest.Exec(t, c, writes)
	_, _, err = c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
	require.NoError(t, err)
	fetchedBefore, stored := src.counts()
	require.NotEmpty(t, stored, "the checkpoint's pages reported Stored")
	got := capDigest(t, c)
	c2 := capOpen(t, name, fx.local) // a cold page cache: every page read again
	require.Equal(t, got, capDigest(t, c2), "a fresh connection reads what the writer sees")
	fetchedAfter, _ := src.counts()
	for pg := range stored {
		assert.Equal(t, fetchedBefore[pg], fetchedAfter[pg], "page %d was stored: read from the file since", pg)
	}
	require.NoError(t, c.Close())
	require.NoError(t, c2.Close())
	detach()

	// Fill in what is still missing from the source's image, as a
	// hydration would: the file is then a whole database, with the writes.
	f, err := os.OpenFile(fx.local, os.O_RDWR, 0)
	require.NoError(t, err)
	for pg := 1; pg*fx.pageSize <= len(fx.image); pg++ {
		if !src.Local(uint32(pg)) {
			_, err := f.WriteAt(fx.image[(pg-1)*fx.pageSize:pg*fx.pageSize], int64(pg-1)*int64(fx.pageSize))
			require.NoError(t, err)
		}
	}
	require.NoError(t, f.Close())
	dbtest.IntegrityOK(t, fx.local)
	filled, err := sqlite3.Open("file:" + fx.local + "?vfs=os")
	require.NoError(t, err)
	defer filled.Close()
	require.Equal(t, got, capDigest(t, filled), "the filled-in file holds what was read through the source")
}

// TestPageSourceErrors: a page the source cannot give fails the statement,
// with the source's reason when it gave one and SQLITE_IOERR_READ
// otherwise; a source that does not answer is cut off at PageTimeout.
func TestPageSourceErrors(t *testing.T) {
	fx := newPagesFixture(t)
	v, name := capRegister(t)
	src := newMemSource(fx.image, fx.pageSize)
	src.local[1] = true
	s := newCapSink(t, filepath.Join(t.TempDir(), "replica.sqlite"), fx.image)
	detach, err := v.attach(fx.local, Options{Sink: s, Pages: src, PageSize: uint32(fx.pageSize), PageTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	defer detach()

	last := uint32(len(fx.image) / fx.pageSize)
	count := func() error {
		c, err := capOpenErr(name, fx.local)
		require.NoError(t, err)
		defer c.Close()
		st, _, err := c.Prepare("SELECT count(*), sum(length(v)) FROM t")
		require.NoError(t, err)
		defer st.Close()
		st.Step()
		return st.Err()
	}

	src.mu.Lock()
	src.fail[last] = errors.New("chunk do/x/chunk/abc: not found")
	src.mu.Unlock()
	err = count()
	require.Error(t, err, "a page the source cannot give")
	assert.ErrorIs(t, err, sqlite3.IOERR_READ, "no reason: a read error")
	_, ok := ReasonOf(err)
	assert.False(t, ok, "no reason given: none read back")

	src.mu.Lock()
	src.fail[last] = Refuse(9, errors.New("chunk do/x/chunk/abc: damaged"))
	src.mu.Unlock()
	err = count()
	assertReason(t, err, 9, "a page refused with a reason")

	src.mu.Lock()
	delete(src.fail, last)
	src.block = true
	src.mu.Unlock()
	err = count()
	require.Error(t, err, "a source that never answers")
	src.mu.Lock()
	ctxErr := src.ctxErr
	src.block = false
	src.mu.Unlock()
	assert.ErrorIs(t, ctxErr, context.DeadlineExceeded, "ReadPage's context ended at PageTimeout")

	require.NoError(t, count(), "the source answering again")
}

// TestPageSourceAttachChecks: a page source needs the page size, and the
// header it serves must agree with it.
func TestPageSourceAttachChecks(t *testing.T) {
	fx := newPagesFixture(t)
	v, _ := capRegister(t)
	src := newMemSource(fx.image, fx.pageSize)
	s := newCapSink(t, filepath.Join(t.TempDir(), "replica.sqlite"), fx.image)
	_, err := v.attach(fx.local, Options{Sink: s, Pages: src})
	require.Error(t, err, "no page size")
	_, err = v.attach(fx.local, Options{Sink: s, Pages: src, PageSize: 8192})
	require.ErrorIs(t, err, errNotPrepared, "page 1 from the source says 4096")
	detach, err := v.attach(fx.local, Options{Sink: s, Pages: src, PageSize: uint32(fx.pageSize)})
	require.NoError(t, err, "page 1 read from the source")
	detach()
	fetched, _ := src.counts()
	assert.Positive(t, fetched[1], "the header came from the source")
}
