package capture

import (
	"fmt"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// mainFile is one connection's handle on an attached database file. In WAL
// mode SQLite writes the database file only while checkpointing: wal.c
// walCheckpoint copies WAL frames back between SQLITE_FCNTL_CKPT_START and
// SQLITE_FCNTL_CKPT_DONE, then truncates the file to the database size
// (after CKPT_DONE: testdata/wal-trace.txt, S3c) and syncs it. Any other
// write means the database is not in WAL mode any more (journal_mode
// changed through this VFS, or it never was): the write bypasses the WAL,
// the capture cannot see it, so it is refused and replication is broken.
//
// Checkpoints run on the checkpointing connection's own database handle,
// so the window is tracked per handle; SQLite never calls one handle
// concurrently.
type mainFile struct {
	passFile
	st        *walState
	wal       *walFile // the same connection's WAL handle, once open
	inCkpt    bool     // between CKPT_START and CKPT_DONE
	afterCkpt bool     // after CKPT_DONE, until the truncate that may follow
	scratch   []byte   // a page, for reads of part of a page from the page source
}

// mainFilePragma is the main database file over a base that implements
// vfs.FilePragma. SQLite 3.54 sends an FCNTL_PRAGMA with every transaction
// ("experimental_pragma_20251114"), and go-sqlite3 copies the pragma name
// into a Go string for every file in the chain that implements FilePragma
// (vfs.go vfsFileControlImpl, once more through its checksum wrapper): over
// the os VFS, which does not implement it, advertising the interface would
// cost an allocation per commit for nothing.
type mainFilePragma struct{ *mainFile }

func (m mainFilePragma) Pragma(name, value string) (string, error) {
	return vfsutil.WrapPragma(m.File, name, value)
}

// Unwrap leads vfsutil.UnwrapFile to the *mainFile.
func (m mainFilePragma) Unwrap() vfs.File { return m.mainFile }

// ReadAt reads through the page source, when the database has one
// (pages.go).
func (m *mainFile) ReadAt(p []byte, off int64) (int, error) {
	if m.st.pages == nil {
		return m.File.ReadAt(p, off)
	}
	return m.readPages(p, off)
}

func (m *mainFile) WriteAt(p []byte, off int64) (int, error) {
	m.afterCkpt = false
	if !m.inCkpt {
		return 0, m.foreign(fmt.Sprintf("%d bytes at offset %d", len(p), off))
	}
	n, err := m.File.WriteAt(p, off)
	m.st.stored(off, n)
	return n, err
}

func (m *mainFile) Truncate(size int64) error {
	if !m.inCkpt && !m.afterCkpt {
		return m.foreign(fmt.Sprintf("truncation to %d bytes", size))
	}
	m.afterCkpt = false
	return m.File.Truncate(size)
}

// foreign breaks replication over a write outside a checkpoint and refuses
// the write, so the uncaptured change never reaches the file.
func (m *mainFile) foreign(what string) error {
	err := &captureError{Path: m.st.dbPath, Kind: errForeignWrite,
		Msg: what + ": the database is not in WAL mode (was journal_mode changed?)"}
	m.st.fail(err)
	return ioError(err)
}

func (m *mainFile) CheckpointStart() {
	m.inCkpt, m.afterCkpt = true, false
	m.passFile.CheckpointStart()
}

func (m *mainFile) CheckpointDone() {
	m.passFile.CheckpointDone()
	m.inCkpt, m.afterCkpt = false, true
}

// CommitPhaseTwo marks the end of a commit of this connection: SQLite has
// written everything of it to the WAL, padding included (phase one), and
// released the WAL write lock. From here on, a WAL frame this connection
// writes that looks like its last commit frame is a new transaction, not
// padding.
func (m *mainFile) CommitPhaseTwo() error {
	if w := m.wal; w != nil && w.pads {
		m.st.mu.Lock()
		if m.st.padFrom == w {
			m.st.padFrom = nil
		}
		m.st.mu.Unlock()
	}
	if err := vfsutil.WrapCommitPhaseTwo(m.File); err != nil && err != sqlite3.NOTFOUND {
		return err
	}
	if !m.st.halted.Load() {
		if err := m.st.sink.PhaseTwo(); err != nil {
			return ioError(err)
		}
	}
	return nil
}
