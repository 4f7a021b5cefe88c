package restore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/vfs"
)

// The VFS IntegrityCheck reads through: read-only, and reading ahead.
//
// Through go-sqlite3's "os" VFS, integrity_check makes one pread per page
// it reads, and it reads most pages twice (it walks each b-tree back from
// its last cell, then scans each table forward to check its rows). On a
// 64 MiB database (BenchmarkIntegrityCheck) that was two thirds of the
// check's CPU, 32,000 preads of 4 KiB. A restored database's tables are
// mostly laid out in page order, so the pages come mostly one beside the
// last, forward or backward, and one pread of a window serves the next
// ones from memory: about 700 preads, the check 10-20% faster. Not more:
// most of a pread's cost is the kernel copying the page cache out, which
// any VFS over pread pays (on the machine that measured all this, a
// 64 MiB file in the page cache took 20-28 ms to read in 4 KiB preads,
// 16 ms in 64 KiB to 1 MiB ones).
//
// The window is bounded and reused, so memory stays at one window per
// check whatever the database's size. It is filled only when a read
// continues a run, and each fill of a run is twice the last, up to the
// window; any other read goes straight to the file, as through the os VFS,
// and keeps the window. Scattered pages (a b-tree of random keys, an index
// looked up for each row) thus cost what they cost before, not a window
// each (BenchmarkIntegrityCheck's random-keys).
//
// Like immutable=1 through the os VFS, which IntegrityCheck used before,
// the file is opened read-only and assumed not to change: no locks, no
// -wal, -shm or -journal looked for or created, every write refused.

// integrityVFSName is the name the VFS is registered under; private to
// this package, no database outside IntegrityCheck is opened through it.
const integrityVFSName = "framectl-restore-integrity"

const (
	// integrityWindow bounds the read-ahead: one buffer of this size per
	// check. On the 64 MiB fixtures, windows of 128 KiB to 4 MiB measured
	// within noise of each other (760 preads for 256 KiB, 320 for 4 MiB,
	// the same bytes): past a few hundred calls, what costs is the bytes,
	// so the window is kept small.
	integrityWindow = 256 << 10
	// integrityFirstFill is the first fill of a run.
	integrityFirstFill = 32 << 10
	// integrityGap is how far past the window's edge a read may land and
	// still continue its run (interior and overflow pages sit between the
	// leaves).
	integrityGap = 16 << 10
)

func init() {
	vfs.Register(integrityVFSName, integrityVFS{})
}

// integrityVFS opens main databases read-only through integrityFile.
// Temporary files (SQLite may want one for a sort) go to the os VFS, as in
// go-sqlite3's readervfs; journals and WALs are refused, since an
// immutable database has none.
type integrityVFS struct{}

var _ vfs.VFS = integrityVFS{}

func (integrityVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	if name == "" || flags&vfs.OPEN_DELETEONCLOSE != 0 {
		return vfs.Find("os").Open(name, flags)
	}
	if flags&vfs.OPEN_MAIN_DB == 0 {
		return nil, flags, sqlite3.CANTOPEN
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, flags, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, flags, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, flags, vfs.SystemError(fmt.Errorf("%s: not a regular file", name), sqlite3.CANTOPEN_ISDIR)
	}
	flags = flags&^(vfs.OPEN_READWRITE|vfs.OPEN_CREATE) | vfs.OPEN_READONLY
	return newIntegrityFile(f, st.Size()), flags, nil
}

func (integrityVFS) Delete(name string, syncDir bool) error {
	return sqlite3.IOERR_DELETE
}

// Access says no file exists, so SQLite looks for no hot journal or WAL
// (with IOCAP_IMMUTABLE it does not ask).
func (integrityVFS) Access(name string, flags vfs.AccessFlag) (bool, error) {
	return false, nil
}

func (integrityVFS) FullPathname(name string) (string, error) {
	return filepath.Abs(name)
}

// integrityFile serves reads of one immutable file from a read-ahead
// window. SQLite calls it from its connection's goroutine only.
type integrityFile struct {
	src  io.ReaderAt
	cl   io.Closer
	size int64 // at open: the file does not change under the check

	buf  []byte // the window: buf[:n] holds the file from off; nil until the first fill
	off  int64
	n    int
	fill int // the next fill's length, doubling along a run

	lastOff, lastEnd int64 // the previous read
	dir, row         int   // the previous read's direction from the one before, and how many before it went that way
	inRun            bool  // the previous read was served from the window
}

var _ vfs.File = (*integrityFile)(nil)

// newIntegrityFile reads src, of size bytes; Close closes src if it is an
// io.Closer.
func newIntegrityFile(src io.ReaderAt, size int64) *integrityFile {
	f := &integrityFile{src: src, size: size, fill: integrityFirstFill, lastOff: -1, lastEnd: -1}
	f.cl, _ = src.(io.Closer)
	return f
}

// ReadAt serves p from the window if it holds it, else refills the window
// if p continues a run, else reads p from the file. Like os.File, it
// returns io.EOF with what is left when p runs past the end.
func (f *integrityFile) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	run := f.continues(off, end)
	f.lastOff, f.lastEnd = off, end
	if off >= f.off && end <= f.off+int64(f.n) {
		f.inRun = true
		return copy(p, f.buf[off-f.off:f.n]), nil
	}
	// Reads off a run, large reads and reads past the end go to the file.
	if run == 0 || len(p) > integrityWindow/2 || off >= f.size {
		f.fill, f.inRun = integrityFirstFill, false
		return f.src.ReadAt(p, off)
	}
	f.inRun = true
	length := int64(max(f.fill, len(p)))
	start := off
	if run < 0 {
		start = max(0, end-length)
	}
	length = min(length, f.size-start)
	if f.buf == nil {
		f.buf = make([]byte, integrityWindow)
	}
	n, err := f.src.ReadAt(f.buf[:length], start)
	if err != nil && !errors.Is(err, io.EOF) {
		f.n, f.inRun = 0, false
		return 0, err
	}
	f.off, f.n = start, n
	f.fill = min(2*f.fill, integrityWindow)
	if off >= start+int64(n) {
		return 0, io.EOF
	}
	c := copy(p, f.buf[off-start:n])
	if c < len(p) {
		return c, io.EOF // the file ended under SQLite's read
	}
	return c, nil
}

// continues tells whether the read [off, end) continues a run: 1 forward,
// -1 backward, 0 neither. A read continues a run when the one before was
// served from the window and it lands at, or a little past, the window's
// edge, or when it is the third in a row to lie right beside the one
// before, in one direction. Only such a row starts a
// run: in a b-tree of random keys, neighbouring pages come often enough
// that a fill for each cost more than it saved (BenchmarkIntegrityCheck's
// random-keys reads 77 MiB of pages: 142 MiB were read when any read within
// 64 KiB of the last started a run, 82 MiB when the page beside it did).
func (f *integrityFile) continues(off, end int64) int {
	dir := 0
	switch {
	case off == f.lastEnd:
		dir = 1
	case end == f.lastOff:
		dir = -1
	}
	if dir != 0 && dir == f.dir {
		f.row++
	} else {
		f.row = 0
	}
	f.dir = dir
	winEnd := f.off + int64(f.n)
	switch {
	case f.inRun && off >= winEnd && off-winEnd <= integrityGap:
		return 1
	case f.inRun && end <= f.off && f.off-end <= integrityGap:
		return -1
	case f.row > 0:
		return dir
	}
	return 0
}

func (f *integrityFile) Close() error {
	f.buf = nil
	if f.cl == nil {
		return nil
	}
	return f.cl.Close()
}

func (f *integrityFile) Size() (int64, error) { return f.size, nil }

// WriteAt and Truncate are refused: checking a file never changes it.
func (f *integrityFile) WriteAt(p []byte, off int64) (int, error) { return 0, sqlite3.READONLY }
func (f *integrityFile) Truncate(size int64) error                { return sqlite3.READONLY }
func (f *integrityFile) Sync(flags vfs.SyncFlag) error            { return sqlite3.READONLY }

// Lock and Unlock take no lock, like immutable=1: the caller vouches that
// nothing writes the file while it is checked (Restore checks its output
// before it renames it into place).
func (f *integrityFile) Lock(lock vfs.LockLevel) error    { return nil }
func (f *integrityFile) Unlock(lock vfs.LockLevel) error  { return nil }
func (f *integrityFile) CheckReservedLock() (bool, error) { return false, nil }
func (f *integrityFile) SectorSize() int                  { return 0 }

// DeviceCharacteristics says the file is immutable: SQLite then opens it as
// immutable=1 does (pager.c), read-only, with no locks and no journal.
func (f *integrityFile) DeviceCharacteristics() vfs.DeviceCharacteristic {
	return vfs.IOCAP_IMMUTABLE | vfs.IOCAP_SUBPAGE_READ
}
