package capture

import (
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// passFile forwards a vfs.File and every optional file interface to the
// file it wraps. go-sqlite3 discovers optional behaviour by type assertion
// on the File a VFS returns (vfs/vfs.go vfsOpen and vfsFileControlImpl), so
// a wrapper that does not forward an interface silently turns it off. The
// one that bites: without SharedMemory, SQLite sees a file with no xShm*
// methods, cannot build a shared wal-index, and PRAGMA journal_mode=WAL
// quietly answers "delete" (pager.c sqlite3PagerWalSupported is false
// without xShmMap outside locking_mode=EXCLUSIVE, and vdbe.c OP_JournalMode
// then keeps the old mode; TestCaptureWALMode checks that WAL works here).
// PowersafeOverwrite matters too: vfsOpen applies the psow URI parameter
// through it, and psow decides whether SQLite pads WAL commits.
//
// The wrapped files for the main database and the WAL embed passFile and
// override only what they watch. FilePragma is the exception: it is
// forwarded only where the base implements it (mainFilePragma).
type passFile struct{ vfs.File }

func (f *passFile) Unwrap() vfs.File                { return f.File }
func (f *passFile) SharedMemory() vfs.SharedMemory  { return vfsutil.WrapSharedMemory(f.File) }
func (f *passFile) MemoryMapper() vfs.MemoryMapper  { return vfsutil.WrapMemoryMapper(f.File) }
func (f *passFile) LockState() vfs.LockLevel        { return vfsutil.WrapLockState(f.File) }
func (f *passFile) PersistWAL() bool                { return vfsutil.WrapPersistWAL(f.File) }
func (f *passFile) SetPersistWAL(keep bool)         { vfsutil.WrapSetPersistWAL(f.File, keep) }
func (f *passFile) PowersafeOverwrite() bool        { return vfsutil.WrapPowersafeOverwrite(f.File) }
func (f *passFile) SetPowersafeOverwrite(psow bool) { vfsutil.WrapSetPowersafeOverwrite(f.File, psow) }
func (f *passFile) ChunkSize(size int)              { vfsutil.WrapChunkSize(f.File, size) }
func (f *passFile) SizeHint(size int64) error       { return vfsutil.WrapSizeHint(f.File, size) }
func (f *passFile) HasMoved() (bool, error)         { return vfsutil.WrapHasMoved(f.File) }
func (f *passFile) Overwrite() error                { return vfsutil.WrapOverwrite(f.File) }
func (f *passFile) SyncSuper(super string) error    { return vfsutil.WrapSyncSuper(f.File, super) }
func (f *passFile) CommitPhaseTwo() error           { return vfsutil.WrapCommitPhaseTwo(f.File) }
func (f *passFile) BeginAtomicWrite() error         { return vfsutil.WrapBeginAtomicWrite(f.File) }
func (f *passFile) CommitAtomicWrite() error        { return vfsutil.WrapCommitAtomicWrite(f.File) }
func (f *passFile) RollbackAtomicWrite() error      { return vfsutil.WrapRollbackAtomicWrite(f.File) }
func (f *passFile) CheckpointStart()                { vfsutil.WrapCheckpointStart(f.File) }
func (f *passFile) CheckpointDone()                 { vfsutil.WrapCheckpointDone(f.File) }
func (f *passFile) BusyHandler(h func() bool)       { vfsutil.WrapBusyHandler(f.File, h) }

// Every optional interface go-sqlite3 v0.37.0 defines, for the pass-through
// (FilePragma: mainFilePragma) and for both files that embed it (a method
// they override must keep the signature). The unexported ones (fileControl,
// filePDB) cannot be forwarded; the os VFS implements neither.
var (
	_ vfs.FileUnwrap             = (*passFile)(nil)
	_ vfs.FileSharedMemory       = (*passFile)(nil)
	_ vfs.FileMemoryMapper       = (*passFile)(nil)
	_ vfs.FileLockState          = (*passFile)(nil)
	_ vfs.FilePersistWAL         = (*passFile)(nil)
	_ vfs.FilePowersafeOverwrite = (*passFile)(nil)
	_ vfs.FileChunkSize          = (*passFile)(nil)
	_ vfs.FileSizeHint           = (*passFile)(nil)
	_ vfs.FileHasMoved           = (*passFile)(nil)
	_ vfs.FileOverwrite          = (*passFile)(nil)
	_ vfs.FileSync               = (*passFile)(nil)
	_ vfs.FileCommitPhaseTwo     = (*passFile)(nil)
	_ vfs.FileBatchAtomicWrite   = (*passFile)(nil)
	_ vfs.FileCheckpoint         = (*passFile)(nil)
	_ vfs.FileBusyHandler        = (*passFile)(nil)
	_ vfs.FilePragma             = mainFilePragma{}

	_ vfs.FileSharedMemory       = (*mainFile)(nil)
	_ vfs.FileCheckpoint         = (*mainFile)(nil)
	_ vfs.FileCommitPhaseTwo     = (*mainFile)(nil)
	_ vfs.FilePowersafeOverwrite = (*mainFile)(nil)
	_ vfs.FileUnwrap             = (*mainFile)(nil)

	_ vfs.FileSharedMemory       = (*walFile)(nil)
	_ vfs.FilePowersafeOverwrite = (*walFile)(nil)
	_ vfs.FileSizeHint           = (*walFile)(nil)
	_ vfs.FileUnwrap             = (*walFile)(nil)
)
