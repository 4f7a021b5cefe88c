package tails

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/fsync"
	"github.com/framectl/framectl/internal/logattr"
)

// save makes st a's state: nothing when it is a's state already, a record
// appended when a has a file, a new file otherwise; then, when the file's
// dead part (records that the last whole state makes moot) outgrows its
// live part, a rewrite. On failure a's state is the one before, or a is
// failed (ErrFailed).
func (s *Store) save(a *tail, st follow.State) error {
	if a.failed != nil {
		return a.failed
	}
	rec, bytes, err := change(&a.st, a.bytes, &st, s.cfg.Limits)
	if err != nil || rec == nil {
		return err
	}
	if a.f == nil {
		err = s.rewrite(a, &st, bytes)
	} else {
		err = s.appendTo(a, rec)
	}
	if err != nil {
		return err
	}
	a.st, a.bytes = clip(st), bytes
	if live := fileBytes(a.name, a.bytes); a.size-live > max(live, s.rewriteMin) {
		// The state is durable already; a rewrite that fails leaves it so.
		if err := s.rewrite(a, &a.st, a.bytes); err != nil && !errors.Is(err, ErrFull) {
			s.log.Warn("rewriting a file failed", logattr.Actor, a.name, logattr.File, a.path, logattr.Err, err)
		}
	}
	return nil
}

// reserve takes n bytes of the store's bound for a write, or fails with
// ErrFull.
func (s *Store) reserve(a *tail, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used+s.reserved+n > s.cfg.MaxBytes {
		return fmt.Errorf("%w: actor %q: %d bytes more would take the store's %d past its bound of %d",
			ErrFull, a.name, n, s.used+s.reserved, s.cfg.MaxBytes)
	}
	s.reserved += n
	return nil
}

// settle ends a reservation of n bytes, the files now holding delta bytes
// more (or fewer) than before, a's size.
func (s *Store) settle(a *tail, n, delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved -= n
	s.used += delta
	if a.f != nil {
		s.files[a.name] = a.size
	}
}

// appendTo appends rec to a's file and fsyncs it. A failed write or fsync
// is undone: the file is cut back to where its last record ends and
// fsynced (which also drops what the failed write left in the kernel's
// cache), so the state before is what the disk holds; if that fails too,
// a is failed.
func (s *Store) appendTo(a *tail, rec follow.Message) error {
	b, err := appendRecord(nil, rec, s.cfg.Limits)
	if err != nil {
		return fmt.Errorf("tails: actor %q: %w", a.name, err) // change checked what the encoder does: a bug
	}
	n := int64(len(b))
	if err := s.reserve(a, n); err != nil {
		return err
	}
	_, err = a.f.WriteAt(b, a.size)
	if err == nil {
		err = a.f.Sync()
	}
	if err != nil {
		err = ioError(a, "appending to", err)
		if uerr := undo(a.f, a.size); uerr != nil {
			s.fail(a, errors.Join(err, uerr))
			s.settle(a, n, 0)
			return a.failed
		}
		s.settle(a, n, 0)
		return err
	}
	a.size += n
	s.settle(a, n, n)
	return nil
}

func undo(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("cutting %s back to %d bytes: %w", f.Name(), size, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s cut back: %w", f.Name(), err)
	}
	return nil
}

// rewrite replaces a's file with one holding st alone (bytes of entries):
// written to a temporary file, fsynced, renamed over the old one, the
// directory fsynced. The new file counts against the bound while the old
// one still does. Before the rename a failure changes nothing; after it,
// a failed directory fsync leaves unknown which file a crash keeps, so a
// is failed.
func (s *Store) rewrite(a *tail, st *follow.State, bytes int64) error {
	data, err := wholeFile(a.name, st, s.cfg.Limits)
	if err != nil {
		return fmt.Errorf("tails: actor %q: %w", a.name, err) // change checked what the encoder does: a bug
	}
	n := int64(len(data))
	if err := s.reserve(a, n); err != nil {
		return err
	}
	tmp := a.path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = os.Rename(tmp, a.path)
		}
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}
	if err != nil {
		s.settle(a, n, 0)
		return ioError(a, "writing a new file for", err)
	}
	old := int64(0)
	if a.f != nil {
		old = a.size
		a.f.Close()
	}
	a.f, a.size = f, n
	s.settle(a, n, n-old)
	if err := fsync.Dir(s.dir); err != nil {
		s.fail(a, err)
		return a.failed
	}
	return nil
}

// fail marks a failed: refused until the store is reopened.
func (s *Store) fail(a *tail, cause error) {
	a.failed = &failedError{actor: a.name, cause: cause}
	a.fl = nil
	s.log.Error("actor refused until the store is reopened: its file is in an unknown state", logattr.Actor, a.name, logattr.File, a.path, logattr.Err, cause)
}

// ioError wraps an error of the disk, as ErrFull too when the disk is
// full.
func ioError(a *tail, doing string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %s actor %q's file: %w", ErrFull, doing, a.name, err)
	}
	return fmt.Errorf("tails: %s actor %q's file: %w", doing, a.name, err)
}
