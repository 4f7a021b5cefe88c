package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/framectl/framectl/internal/fsync"
)

// Dir is a bucket in a local directory: the embedded default for one
// machine, demos and tests. It honours the whole contract, conditional writes
// included, for any number of goroutines and processes sharing the directory.
//
// Layout. The object "a/b/c" is the regular file <root>/a/b/c holding exactly
// the object's bytes. A directory exists only while keys live under it:
// deleting the last one removes it, so "a/b" can become a key later (as on
// versitygw, and for the same reason "a/b" and "a/b/c" cannot both exist:
// ErrKeyConflict). <root>/.framectl is reserved: tmp/ holds bodies being
// written, lock is the file the key locks are taken on.
//
// Writes. The body is written to a file in .framectl/tmp (same filesystem as
// the keys) and fsynced without any lock held. Then, under the key's lock,
// the condition is checked against the current file, parent directories are
// created and the file is renamed over the key. The parent directory is
// fsynced before Put returns. Readers open the file, so they see the old
// object or the new one, whole.
//
// Locks. A commit (a Put's check and rename, a Delete's removal) holds the
// lock of its key and of no other, so a process stopped (SIGSTOP, a
// debugger) or hung inside one delays only that key: never other keys, nor
// the lease renewals that let another node take over from it. On Linux a
// key's lock is an open file description lock (fcntl F_OFD_SETLK) on one
// byte of .framectl/lock, chosen by a hash of the key. Such a lock belongs
// to the open file, and every commit opens the file anew, so it excludes
// other processes and other Dirs of this process alike; it dies with its
// process. Within a Dir, goroutines first take turns per key, so one
// waiting for a key holds nothing another key needs and is handed the key
// as soon as it is free. The file lock is polled, not waited for, so a
// writer gives up when its context ends. Elsewhere on unix (macOS, the
// BSDs: no OFD locks) the fallback is one flock(2) on the whole file: as
// exclusive, but a stopped holder there stalls every writer of the bucket.
// Where there is neither (Windows), writes fail.
//
// Directories. Keys with different locks share directories: a Delete of
// the last key in d removes d while a Put of a sibling has created it and
// not yet renamed into it, and a Put of "p" removes the empty directory p
// that a Put of "p/q" has just made. A commit whose path changed under it
// (a parent gone or now an object, a directory in its key's place) starts
// its checks again, a bounded number of times; directories are only ever
// removed by rmdir, which fails on anything not an empty directory. So "p"
// and "p/q" never both exist: of two racing puts, one wins and the other
// is ErrKeyConflict.
//
// ETags. An ETag is derived from the file's modification time in
// nanoseconds, its inode number and its size, so Stat and List read no
// content (hashing would cost a full read of a multi-gigabyte snapshot on
// every Stat, or a second file per object to keep it in). The kernel's own
// timestamps are not enough: they tick coarsely (4 ms on the ext4 this was
// written on) and many filesystems reuse a replaced file's inode number, so
// two versions written in one tick could share an ETag and a stale
// compare-and-swap would succeed. Therefore every commit sets the new file's
// modification time, under the key's lock, to the current time and strictly
// after the modification time of the version it replaces; the ETag reported
// is computed from what the filesystem then stores. Writing identical
// content twice yields two ETags (S3 yields one): a caller can only see a
// spurious ErrPrecondition, never a lost update. What is not covered: the
// wall clock stepping back so far that a key deleted and re-created gets the
// timestamp, inode and size of a version from before the delete.
//
// Requirements: a case-sensitive filesystem (on a case-insensitive one "A"
// and "a" would be one object) that supports OFD locks (Linux) or flock
// (elsewhere) and rename within a directory tree; every process writing
// the directory must use the same kind of lock. The root is trusted: the
// bucket never creates symbolic links, and Get, Stat and List treat one at
// a key's path as no object, but links planted in parent directories by
// someone who can already write the root are followed.
type Dir struct {
	root  string   // absolute and clean
	locks keyLocks // the in-process half of the key locks
	// lists keeps large directories' sorted names for the later pages of
	// a listing (see listCache).
	lists *listCache
}

var _ Bucket = (*Dir)(nil)

const (
	reservedTmp  = "tmp"
	reservedLock = "lock"
	// staleTempAge: temporary files older than this are left-overs of a
	// crashed writer and removed when the bucket is opened. A live writer's
	// temporary file is touched by every write, so it never looks stale.
	staleTempAge = 24 * time.Hour
)

// NewDir returns the directory bucket rooted at root, which must exist (use
// Open with a file:// URL to create it). It prepares the bucket for
// writing: the reserved directory is created and left-over temporary files
// of crashed writers are removed. (OpenExisting opens a directory bucket
// without writing anything.)
func NewDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("bucket: directory %q: %w", root, err)
	}
	return newDir(abs, true)
}

// newDir opens the bucket at abs; prepare makes NewDir's writes, without
// which opening changes nothing on disk (the first Put creates tmp/).
func newDir(abs string, prepare bool) (*Dir, error) {
	d := &Dir{root: abs, lists: newListCache()}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil, &Error{Op: "open", Key: abs, Err: ErrNoBucket}
	case err != nil:
		return nil, &Error{Op: "open", Key: abs, Err: err}
	case !fi.IsDir():
		return nil, &Error{Op: "open", Key: abs, Err: errors.New("not a directory")}
	}
	if !prepare {
		return d, nil
	}
	if err := os.MkdirAll(d.tmpDir(), 0o755); err != nil {
		return nil, &Error{Op: "open", Key: abs, Err: err}
	}
	d.removeStaleTemps()
	return d, nil
}

// String returns the bucket's file:// URL.
func (d *Dir) String() string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(d.root)}).String()
}

// Root returns the directory the bucket lives in.
func (d *Dir) Root() string { return d.root }

func (d *Dir) tmpDir() string   { return filepath.Join(d.root, ReservedName, reservedTmp) }
func (d *Dir) lockPath() string { return filepath.Join(d.root, ReservedName, reservedLock) }
func (d *Dir) path(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

// Get opens the object. The Info comes from the open file, so it describes
// exactly the bytes the reader returns even if the key is replaced meanwhile.
func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, &Error{Op: "get", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, Info{}, &Error{Op: "get", Key: key, Err: err}
	}
	f, err := os.OpenFile(d.path(key), os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = ErrNotFound // a symbolic link: not an object
		}
		return nil, Info{}, &Error{Op: "get", Key: key, Err: d.missing(err)}
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = ErrNotFound // a "directory" of other keys is not an object
	}
	if err != nil {
		f.Close()
		return nil, Info{}, &Error{Op: "get", Key: key, Err: err}
	}
	return f, fileInfo(key, fi), nil
}

// Stat describes the object from its file's metadata.
func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, &Error{Op: "stat", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return Info{}, &Error{Op: "stat", Key: key, Err: err}
	}
	fi, err := os.Lstat(d.path(key))
	if err != nil {
		return Info{}, &Error{Op: "stat", Key: key, Err: d.missing(err)}
	}
	if !fi.Mode().IsRegular() {
		return Info{}, &Error{Op: "stat", Key: key, Err: ErrNotFound}
	}
	return fileInfo(key, fi), nil
}

// Put writes the body to a temporary file, then commits it under the key's
// lock.
func (d *Dir) Put(ctx context.Context, key string, body io.Reader, size int64, cond Condition) (Info, error) {
	if err := checkPut(key, size, cond); err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	if err := d.precheck(key, cond); err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	tmp, err := d.writeTemp(ctx, body, size)
	if err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	committed := false
	defer func() {
		tmp.Close()
		if !committed {
			os.Remove(tmp.Name())
		}
	}()
	if err := ctx.Err(); err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	info, syncDirs, err := d.commit(ctx, key, tmp, cond)
	if err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	committed = true // the name is free again: another put may reuse it
	for _, dir := range syncDirs {
		if err := syncDir(dir); err != nil {
			return Info{}, &Error{Op: "put", Key: key, Err: err}
		}
	}
	return info, nil
}

// precheck fails a conditional put that has already lost, before its body
// is written: a create-only put of an existing key (the common case when
// many nodes race to claim one) or a compare-and-swap on a stale ETag. The
// answer is correct as of the check; a put that passes is checked again
// under the key's lock.
func (d *Dir) precheck(key string, cond Condition) error {
	if !cond.IfAbsent && cond.IfMatch == "" {
		return nil
	}
	fi, err := os.Lstat(d.path(key))
	exists := err == nil && fi.Mode().IsRegular()
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return nil // let the commit report it
	case cond.IfAbsent && exists:
		return ErrPrecondition
	case cond.IfMatch != "" && (!exists || etagOf(fi) != cond.IfMatch):
		if err != nil && d.missing(err) == ErrNoBucket {
			return ErrNoBucket
		}
		return ErrPrecondition
	}
	return nil
}

// writeTemp copies exactly size bytes (all of them for -1) into a new
// temporary file and fsyncs it. The file is returned open; the caller
// removes it.
func (d *Dir) writeTemp(ctx context.Context, body io.Reader, size int64) (*os.File, error) {
	tmp, err := os.CreateTemp(d.tmpDir(), "put-*")
	if errors.Is(err, fs.ErrNotExist) {
		// The reserved directory was removed from under us, or the whole root.
		if err = d.missing(err); !errors.Is(err, ErrNoBucket) {
			if err = os.MkdirAll(d.tmpDir(), 0o755); err == nil {
				tmp, err = os.CreateTemp(d.tmpDir(), "put-*")
			}
		}
	}
	if err != nil {
		return nil, err
	}
	src := io.Reader(ctxReader{ctx, body})
	if size >= 0 {
		src = io.LimitReader(src, size)
	}
	n, err := io.Copy(tmp, src)
	if err == nil && size >= 0 && n < size {
		err = fmt.Errorf("body ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// commit renames tmp over key if cond holds. It returns the directories to
// fsync for the rename (and any directories it created) to be durable.
func (d *Dir) commit(ctx context.Context, key string, tmp *os.File, cond Condition) (Info, []string, error) {
	unlock, err := d.lock(ctx, key)
	if err != nil {
		return Info{}, nil, err
	}
	defer unlock()
	if testHook != nil {
		testHook("locked", key)
	}
	for attempt := 1; ; attempt++ {
		info, syncDirs, err := d.commitLocked(key, tmp, cond)
		if !errors.Is(err, errTreeChanged) {
			return info, syncDirs, err
		}
		if attempt == maxTreeAttempts {
			return Info{}, nil, fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
	}
}

// errTreeChanged: a directory on the key's path was created or removed by
// a commit of another key between two steps of this one (see Directories
// on Dir); the commit starts again from its checks.
var errTreeChanged = errors.New("the directories on the key's path kept changing")

// maxTreeAttempts bounds the restarts of one commit. Each restart needs
// another key's commit to change the tree inside the few system calls
// between this one's mkdir and rename; a hundred in a row means something
// else is wrong.
const maxTreeAttempts = 100

// commitLocked is one attempt of commit, under key's lock: the file at
// key's path changes only under that lock, but the directories above it
// and a directory in its place may change at any time.
func (d *Dir) commitLocked(key string, tmp *os.File, cond Condition) (Info, []string, error) {
	path := d.path(key)
	cur, err := os.Lstat(path)
	exists, isDir := false, false
	switch {
	case err == nil && cur.Mode().IsRegular():
		exists = true
	case err == nil && cur.IsDir():
		isDir = true
	case err == nil:
		return Info{}, nil, fmt.Errorf("%s is not a regular file (%v)", path, cur.Mode().Type())
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		// absent; ENOTDIR: a parent is an object, mkdirParents reports it
	default:
		return Info{}, nil, err
	}

	switch {
	case cond.IfAbsent && exists:
		return Info{}, nil, ErrPrecondition
	case cond.IfMatch != "" && !exists:
		return Info{}, nil, ErrPrecondition
	case cond.IfMatch != "" && etagOf(cur) != cond.IfMatch:
		return Info{}, nil, ErrPrecondition
	}
	if isDir {
		if err := removeEmptyTree(path); err != nil {
			return Info{}, nil, err // ErrKeyConflict: other keys live under this name
		}
	}

	created, err := d.mkdirParents(key)
	if err != nil {
		return Info{}, nil, err
	}
	undo := func() { removeEmptyDirs(created) }

	var prev fs.FileInfo
	if exists {
		prev = cur
	}
	fi, err := stampAfter(tmp, prev)
	if err != nil {
		undo()
		return Info{}, nil, err
	}
	if testHook != nil {
		testHook("renaming", key)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		undo()
		// A parent was removed (ENOENT) or is an object now (ENOTDIR), or
		// a directory took the key's name (EISDIR; ENOTEMPTY or EEXIST once
		// it holds something).
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) ||
			errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return Info{}, nil, fmt.Errorf("rename %s: %w", path, errTreeChanged)
		}
		return Info{}, nil, err
	}

	syncDirs := []string{filepath.Dir(path)}
	for _, dir := range created {
		syncDirs = append(syncDirs, filepath.Dir(dir))
	}
	return fileInfo(key, fi), syncDirs, nil
}

// mkdirParents creates the missing directories above key, top down, and
// returns the ones it created (outermost first). A component that exists as
// an object is ErrKeyConflict; one removed while it worked, errTreeChanged.
func (d *Dir) mkdirParents(key string) ([]string, error) {
	var created []string
	dir := d.root
	comps := strings.Split(key, "/")
	for _, c := range comps[:len(comps)-1] {
		dir = filepath.Join(dir, c)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			created = append(created, dir)
			continue
		}
		if errors.Is(err, fs.ErrExist) {
			fi, serr := os.Lstat(dir)
			if serr == nil && fi.IsDir() {
				continue
			}
			if errors.Is(serr, fs.ErrNotExist) {
				err = fs.ErrNotExist // removed between the mkdir and the lstat
			}
		}
		removeEmptyDirs(created)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("mkdir %s: %w", dir, errTreeChanged)
		case errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR):
			return nil, ErrKeyConflict
		}
		return nil, err
	}
	return created, nil
}

// removeEmptyTree removes the directory tree at path if it holds no file.
// Directories without keys are left by a crash between creating a key's
// parents and renaming it into place, and exist for a moment while another
// key's commit is under way; they are not keys, so they must not block a
// put of their name. It returns ErrKeyConflict at the first file it finds,
// and errTreeChanged if a directory appeared in the tree as it emptied it.
func removeEmptyTree(path string) error {
	ents, err := os.ReadDir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // removed already
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("read %s: %w", path, errTreeChanged)
	case err != nil:
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			return ErrKeyConflict
		}
		if err := removeEmptyTree(filepath.Join(path, e.Name())); err != nil {
			return err
		}
	}
	err = rmdir(path)
	switch {
	case err == nil || errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("remove %s: %w", path, errTreeChanged)
	}
	return err
}

// rmdir removes an empty directory, and never a file: os.Remove would
// unlink a file that another key's commit has just put where this one
// saw a directory.
func rmdir(path string) error {
	if err := syscall.Rmdir(path); err != nil {
		return &fs.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// removeEmptyDirs removes dirs, innermost first, while they are empty.
func removeEmptyDirs(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		if rmdir(dirs[i]) != nil {
			return
		}
	}
}

// stampAfter sets f's modification time to now, or just after prev's if the
// clock has not moved past it, so that every version of a key has a distinct
// modification time (see ETags on Dir). Filesystems that store coarser
// timestamps than asked get a larger step. It returns f's metadata as stored.
func stampAfter(f *os.File, prev fs.FileInfo) (fs.FileInfo, error) {
	t := time.Now()
	for step := time.Nanosecond; ; step *= 1000 {
		if prev != nil && !t.After(prev.ModTime()) {
			t = prev.ModTime().Add(step)
		}
		if err := os.Chtimes(f.Name(), t, t); err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if prev == nil || fi.ModTime().After(prev.ModTime()) {
			return fi, nil
		}
		if step >= time.Second {
			return nil, fmt.Errorf("filesystem does not store modification times finer than %v", step)
		}
		t = prev.ModTime() // the next round adds a larger step
	}
}

// Delete removes the object and then every directory above it that it
// leaves empty.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return &Error{Op: "delete", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &Error{Op: "delete", Key: key, Err: err}
	}
	dir, err := d.remove(ctx, key)
	if err == nil && dir != "" {
		err = syncDir(dir)
	}
	if err != nil {
		return &Error{Op: "delete", Key: key, Err: err}
	}
	return nil
}

// DeleteMany removes each key in turn, then fsyncs each directory it changed
// once.
func (d *Dir) DeleteMany(ctx context.Context, keys []string) error {
	var first error
	fail := func(key string, err error) {
		if first == nil {
			first = &Error{Op: "delete", Key: key, Err: err}
		}
	}
	touched := map[string]string{} // directory to fsync -> a key deleted from it
	for _, key := range keys {
		if err := CheckKey(key); err != nil {
			fail(key, err)
			continue
		}
		if err := ctx.Err(); err != nil {
			fail(key, err)
			break
		}
		dir, err := d.remove(ctx, key)
		if err != nil {
			fail(key, err)
			continue
		}
		if _, ok := touched[dir]; dir != "" && !ok {
			touched[dir] = key
		}
	}
	for dir, key := range touched {
		if err := syncDir(dir); err != nil {
			fail(key, err)
		}
	}
	return first
}

// remove deletes key's file and the directories it leaves empty, under the
// key's lock. It returns the directory whose entry was removed last (to
// fsync), or "" if there was nothing to delete. A directory another key's
// commit has just created is empty too and may go: that commit starts
// again (see Directories on Dir).
func (d *Dir) remove(ctx context.Context, key string) (string, error) {
	unlock, err := d.lock(ctx, key)
	if err != nil {
		return "", err
	}
	defer unlock()
	path := d.path(key)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return "", nil
	case err != nil:
		return "", err
	case fi.IsDir():
		return "", nil // other keys' directory, not an object
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	dir := filepath.Dir(path)
	for dir != d.root && rmdir(dir) == nil {
		dir = filepath.Dir(dir)
	}
	return dir, nil
}

// testHook, set only by tests (export_test.go), is called at named points
// of a commit: "locked" just after the key's lock is taken, "renaming" just
// before the rename into place; and by a listing, "readdir", when it reads
// a directory from the filesystem.
var testHook func(point, key string)

// missing maps "no such file" to ErrNoBucket when the root itself is gone,
// and to ErrNotFound otherwise (ENOTDIR: a parent of the key is an object).
func (d *Dir) missing(err error) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	if _, serr := os.Stat(d.root); errors.Is(serr, fs.ErrNotExist) {
		return ErrNoBucket
	}
	return ErrNotFound
}

// removeStaleTemps deletes temporary files left by crashed writers. Best
// effort: a failure here only leaves garbage behind.
func (d *Dir) removeStaleTemps() {
	ents, err := os.ReadDir(d.tmpDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTempAge {
			os.Remove(filepath.Join(d.tmpDir(), e.Name()))
		}
	}
}

// fileInfo describes the object stored in the file fi describes.
func fileInfo(key string, fi fs.FileInfo) Info {
	return Info{Key: key, Size: fi.Size(), ETag: etagOf(fi), ModTime: fi.ModTime()}
}

// etagOf is the ETag of a file version: modification time in nanoseconds,
// inode number and size, in hex. See ETags on Dir.
func etagOf(fi fs.FileInfo) string {
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, fi.ModTime().UnixNano(), 16)
	b = append(b, '-')
	b = strconv.AppendUint(b, inode(fi), 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, fi.Size(), 16)
	return string(b)
}

// syncDir fsyncs a directory so that renames and removals in it survive a
// crash. A directory that has vanished meanwhile (its last key was deleted
// by someone else) needs no sync.
func syncDir(dir string) error {
	if err := fsync.Dir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ctxReader stops a long copy when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
