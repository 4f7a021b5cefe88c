package capture

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/framectl/framectl/frames"
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// captureVFS wraps a base VFS (go-sqlite3's "os") and captures the WAL
// commits of the databases attached to it. Every I/O goes to the base VFS;
// the capture watches the main database file (mainfile.go) and the WAL
// (wal.go) of attached databases and passes every other file (journals,
// temporary files) through untouched.
//
// One instance serves the whole process: SQLite finds a VFS by name, and
// all connections to a database must share one capture state (walstate.go).
type captureVFS struct {
	base vfs.VFS

	mu  sync.Mutex
	dbs map[string]*walState // by database path as SQLite names it (fullPath)
}

var _ vfs.VFSFilename = (*captureVFS)(nil)

// newCaptureVFS wraps base; nil means go-sqlite3's "os" VFS.
func newCaptureVFS(base vfs.VFS) *captureVFS {
	if base == nil {
		base = vfs.Find("os")
	}
	return &captureVFS{base: base, dbs: make(map[string]*walState)}
}

// attach is Attach on this VFS.
func (v *captureVFS) attach(path string, opts Options) (detach func(), err error) {
	if opts.Sink == nil {
		return nil, fmt.Errorf("capture: attach %s: Options.Sink is nil", path)
	}
	if opts.Pages != nil && !frames.ValidPageSize(opts.PageSize) {
		return nil, fmt.Errorf("capture: attach %s: a page source needs Options.PageSize, a power of two in 512..65536 (got %d)", path, opts.PageSize)
	}
	if opts.PageTimeout <= 0 {
		opts.PageTimeout = DefaultPageTimeout
	}
	full, err := v.fullPath(path)
	if err != nil {
		return nil, fmt.Errorf("capture: attach %s: %w", path, err)
	}
	if err := checkPrepared(full, opts); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dbs[full] != nil {
		return nil, &captureError{Path: full, Kind: errAttached}
	}
	st := newWALState(full, opts)
	v.dbs[full] = st
	var once sync.Once
	return func() {
		once.Do(func() {
			v.mu.Lock()
			if v.dbs[full] == st {
				delete(v.dbs, full)
			}
			v.mu.Unlock()
			st.detach()
		})
	}, nil
}

// state returns the capture state of an attached database, or nil.
func (v *captureVFS) state(dbPath string) *walState {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dbs[dbPath]
}

// fullPath names a database the way SQLite will: SQLite passes the name
// given to sqlite3_open through the VFS's xFullPathname before it opens
// anything, and opens the database, its journal and its WAL under that name
// (WAL: name + "-wal"). This VFS forwards FullPathname to the base, so the
// result here is exactly what OpenFilename will see.
func (v *captureVFS) fullPath(name string) (string, error) {
	full, err := v.base.FullPathname(name)
	if err != nil && !isOKSymlink(err) {
		return "", err
	}
	return full, nil
}

// The os VFS reports a path reached through a symbolic link with the result
// code SQLITE_OK_SYMLINK (go-sqlite3 vfs/file.go FullPathname), which SQLite
// treats as success. The code is an unexported type, hence reflection.
const sqliteOKSymlink = 0x200 // SQLITE_OK | 2<<8

func isOKSymlink(err error) bool {
	rv := reflect.ValueOf(err)
	return rv.CanUint() && rv.Uint() == sqliteOKSymlink
}

// Open serves callers without a vfs.Filename. SQLite itself always calls
// OpenFilename (this VFS implements vfs.VFSFilename, go-sqlite3 vfs.go
// vfsOpen); the os VFS's own Open refuses named files for that reason
// (vfs/file.go), so only nameless temporary files can get here.
func (v *captureVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	if name == "" {
		return v.OpenFilename(nil, flags)
	}
	return nil, flags, cantOpen(fmt.Errorf("capture: open %s: named files are opened through OpenFilename", name))
}

// OpenFilename opens a file through the base VFS and wraps the main
// database and WAL of attached databases. The os VFS needs the
// *vfs.Filename (it reads URI parameters from it, and refuses named files
// through plain Open), so this forwards it as is.
func (v *captureVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	switch {
	case flags&vfs.OPEN_MAIN_DB != 0:
		// SQLite opens temporary and in-memory databases with OPEN_TEMP_DB
		// (btree.c sqlite3BtreeOpen turns MAIN_DB into TEMP_DB for them),
		// so a MAIN_DB here is a named database file, and ATTACH or
		// VACUUM INTO targets are main databases too.
		path := name.String()
		st := v.state(path)
		if st == nil {
			return nil, flags, cantOpen(&captureError{Path: path, Kind: errNotReplicated,
				Msg: "attach it before opening it through the capture VFS"})
		}
		f, flags, err := vfsutil.WrapOpenFilename(v.base, name, flags)
		if err != nil {
			return nil, flags, err
		}
		m := &mainFile{passFile: passFile{f}, st: st}
		if _, ok := f.(vfs.FilePragma); ok {
			return mainFilePragma{m}, flags, nil
		}
		return m, flags, nil

	case flags&vfs.OPEN_WAL != 0:
		path := name.String()
		st := v.state(name.Database())
		if st == nil {
			return nil, flags, cantOpen(&captureError{Path: path, Kind: errNotReplicated,
				Msg: "the WAL of a database that is not attached"})
		}
		f, flags, err := vfsutil.WrapOpenFilename(v.base, name, flags)
		if err != nil {
			return nil, flags, err
		}
		w := &walFile{passFile: passFile{f}, st: st, path: path, pads: padsCommits(name, f)}
		if err := st.openWAL(w); err != nil {
			f.Close()
			return nil, flags, cantOpen(err)
		}
		// Pair the WAL with its connection's database handle, which tells
		// it when a commit is over (mainFile.CommitPhaseTwo). go-sqlite3
		// registers the database file wrapped in its checksum layer.
		if m, ok := vfsutil.UnwrapFile[*mainFile](name.DatabaseFile()); ok && m.st == st {
			m.wal, w.db = w, m
		}
		return w, flags, nil
	}
	// Journals, temporary files: nothing to capture.
	return vfsutil.WrapOpenFilename(v.base, name, flags)
}

// padsCommits reports whether SQLite pads this WAL's commits to a sector
// boundary (psow=0, see walFile.pads). wal.c sqlite3WalOpen decides it once,
// from the device characteristics of the main database file, which go-sqlite3
// has opened (and applied the psow URI parameter to) before the WAL.
func padsCommits(name *vfs.Filename, wal vfs.File) bool {
	f := name.DatabaseFile()
	if f == nil {
		f = wal
	}
	return f.DeviceCharacteristics()&vfs.IOCAP_POWERSAFE_OVERWRITE == 0
}

// Delete forwards to the base. When SQLite deletes an attached database's
// WAL (the last connection closing, wal.c sqlite3WalClose), the next WAL
// header may carry fresh random salts; the state must know the WAL is gone.
func (v *captureVFS) Delete(name string, syncDir bool) error {
	db, isWAL := strings.CutSuffix(name, "-wal")
	var st *walState
	if isWAL {
		st = v.state(db)
	}
	if st == nil {
		return v.base.Delete(name, syncDir)
	}
	st.mu.Lock()
	// The WAL frames go away with the file: first make sure none is foreign.
	// No handle is open now (SQLite closes the WAL before deleting it).
	ferr := foreignFramesInFile(st, name)
	err := v.base.Delete(name, syncDir)
	if ok, aerr := v.base.Access(name, vfs.ACCESS_EXISTS); aerr == nil && !ok {
		st.walEmptiedLocked()
	}
	notify := ferr != nil && st.breakLocked(ferr)
	st.mu.Unlock()
	if notify {
		st.notifyBroken(ferr)
	}
	return err
}

// foreignFramesInFile runs walState.foreignFramesLocked on a WAL by path.
func foreignFramesInFile(st *walState, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // gone already: nothing to check
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	return st.foreignFramesLocked(path, fi.Size(), f.ReadAt)
}

func (v *captureVFS) Access(name string, flags vfs.AccessFlag) (bool, error) {
	return v.base.Access(name, flags)
}

func (v *captureVFS) FullPathname(name string) (string, error) {
	return v.base.FullPathname(name)
}
