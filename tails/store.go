package tails

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/dirlock"
	"github.com/framectl/framectl/internal/fsync"
	"github.com/framectl/framectl/internal/logattr"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Limits are the cluster's (follow.Limits): MaxTailBytes bounds each
	// actor's entries, and so each record read.
	Limits follow.Limits
	// MaxBytes bounds the store's files together, counted as their sizes,
	// a rewrite's new file included while the old one is still there. A
	// write past it fails with ErrFull. Default DefaultMaxBytes.
	MaxBytes int64
	// CacheBytes bounds the entries kept in memory of actors not in use
	// (their states and followers), and MaxOpen how many such actors keep
	// their file open. The least recently used go first; one read of its
	// file brings an actor back. Defaults DefaultCacheBytes and
	// DefaultMaxOpen.
	CacheBytes int64
	MaxOpen    int
	// Logger receives warnings (a torn record dropped, a rewrite that
	// failed); nil discards them.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxBytes   = 4 << 30
	DefaultCacheBytes = 256 << 20
	DefaultMaxOpen    = 256
)

// minRewriteBytes is the least dead part that gets an actor's file
// rewritten (besides being more than the live part): below it the rewrite,
// two fsyncs and a rename, costs more than the bytes it frees. Measured
// with a tail of one 4 KiB commit, where it alone sets how often a file is
// rewritten (go test ./tails -run '^$' -bench RewriteThreshold -benchtime
// 2000x -count 3, on this project's 2-core machine and its disk): a commit
// takes about 1.0 ms with no threshold, 0.63 ms at 64 KiB, 0.49 ms at
// 256 KiB and 0.47 ms at 1 MiB, which is one append and fsync.
const minRewriteBytes = 1 << 20

// Store is a follower node's store of tails, one State per actor, in one
// directory it locks. Its methods are safe for concurrent use; calls about
// one actor run one at a time.
type Store struct {
	dir        string
	id         string // follower ID (id.go); under mu once open
	gen        uint64 // identity generation (id.go); under mu
	cfg        Config
	log        *slog.Logger
	unlock     func()
	rewriteMin int64

	mu       sync.Mutex
	idle     *sync.Cond // signalled when busy drops to 0
	closed   bool
	busy     int
	files    map[string]int64 // every actor with a file: its size
	used     int64            // the sum of files
	reserved int64            // bytes being written, not yet in files
	actors   map[string]*tail
	lru      list.List // of *tail not in use, least recently used first
	cached   int64     // entry bytes of the actors in lru
}

// tail is what the store holds in memory of one actor. Fields below mu
// are read and written under it; refs, elem under Store.mu.
type tail struct {
	name, path string
	refs       int
	elem       *list.Element

	mu     sync.Mutex
	loaded bool
	f      *os.File // nil: no file
	size   int64    // the file's size: its last record ends there
	st     follow.State
	bytes  int64            // sizeOf(st.Entries)
	fl     *follow.Follower // Handle's, holding st; nil until needed
	failed error            // ErrFailed: refused until the store is reopened
}

// Open opens the store in dir, creating dir if needed, and locks it: a
// second Open of dir, by this process or another, fails with ErrLocked
// until Close. It removes rewrites a crash left unfinished and fsyncs dir,
// so that nothing a process before it renamed is trusted before it is
// durable; it reads no actor's file until the actor is used.
func Open(dir string, cfg Config) (*Store, error) {
	if cfg.MaxBytes < 0 || cfg.CacheBytes < 0 || cfg.MaxOpen < 0 || cfg.Limits.MaxTailBytes < 0 {
		return nil, fmt.Errorf("%w: negative bound in Config", ErrInvalid)
	}
	if cfg.Limits.MaxTailBytes == 0 {
		cfg.Limits.MaxTailBytes = follow.DefaultMaxTailBytes
	}
	cfg.MaxBytes = cmpOr(cfg.MaxBytes, DefaultMaxBytes)
	cfg.CacheBytes = cmpOr(cfg.CacheBytes, DefaultCacheBytes)
	cfg.MaxOpen = cmpOr(cfg.MaxOpen, DefaultMaxOpen)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tails: %w", err)
	}
	unlock, err := dirlock.Lock(dir, lockName)
	var le *dirlock.LockedError
	switch {
	case errors.As(err, &le):
		return nil, fmt.Errorf("%w: %s", ErrLocked, le.Path)
	case err != nil:
		return nil, fmt.Errorf("tails: %w", err)
	}
	id, err := loadID(dir)
	if err != nil {
		unlock()
		return nil, err
	}
	gen, err := loadGeneration(dir)
	if err != nil {
		unlock()
		return nil, err
	}
	s := &Store{dir: dir, id: id, gen: gen, cfg: cfg, log: logger.With(logattr.Subsystem, logattr.SubsystemTails), unlock: unlock, rewriteMin: minRewriteBytes,
		files: map[string]int64{}, actors: map[string]*tail{}}
	s.idle = sync.NewCond(&s.mu)
	if err := s.scan(); err != nil {
		unlock()
		return nil, err
	}
	return s, nil
}

func cmpOr[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// scan lists the directory: actors' files and their sizes, rewrites left
// unfinished (removed). Other files are not the store's and are left
// alone.
func (s *Store) scan() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("tails: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if h, ok := strings.CutSuffix(name, tmpSuffix); ok {
			if _, ok := actorOf(h); ok {
				if err := os.Remove(filepath.Join(s.dir, name)); err != nil {
					return fmt.Errorf("tails: removing an unfinished rewrite: %w", err)
				}
			}
			continue
		}
		actor, ok := actorOf(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("tails: %w", err)
		}
		s.files[actor] = info.Size()
		s.used += info.Size()
	}
	return fsync.Dir(s.dir)
}

// Close closes the store once the calls in flight have returned, and
// unlocks its directory. Calls after it fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for s.busy > 0 {
		s.idle.Wait()
	}
	var err error
	for _, a := range s.actors {
		if a.f != nil {
			err = errors.Join(err, a.f.Close())
		}
	}
	s.actors, s.lru, s.cached = nil, list.List{}, 0
	s.mu.Unlock()
	s.unlock()
	return err
}

// Actors lists the actors the store holds a file for, sorted.
func (s *Store) Actors() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	l := make([]string, 0, len(s.files))
	for a := range s.files {
		l = append(l, a)
	}
	slices.Sort(l)
	return l, nil
}

// Bytes is the size of the store's files together, which Config.MaxBytes
// bounds.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Load returns actor's state as its file holds it (the zero State when it
// has none). Its entries are shared: read only. A file that fails its
// checks is a *FileError naming it; a torn last record is dropped (see
// the package doc) and logged.
func (s *Store) Load(actor string) (follow.State, error) {
	a, err := s.acquire(actor)
	if err != nil {
		return follow.State{}, err
	}
	defer s.release(a)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := s.load(a); err != nil {
		return follow.State{}, err
	}
	return clip(a.st), nil
}

// Save makes st actor's state and returns once that is durable (the file
// and, when it was created or replaced, its directory fsynced). It keeps
// st's entries (read only, as follow.State's are) until the next Save. A
// state that follow.OpenFollower would refuse, or that lowers the stored
// Promised or LogEpoch, is ErrInvalid; a write past Config.MaxBytes or
// onto a full disk is ErrFull. When Save fails, the actor's state is the
// one before, unless the actor is failed (ErrFailed).
func (s *Store) Save(actor string, st follow.State) error {
	a, err := s.acquire(actor)
	if err != nil {
		return err
	}
	defer s.release(a)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := s.load(a); err != nil {
		return err
	}
	a.fl = nil // Handle's follower holds the state before
	return s.save(a, st)
}

// Delete removes actor's file (its state becomes the zero State) and
// fsyncs the directory. It also ends an ErrFailed refusal, since after it
// the disk holds nothing of the actor for certain.
func (s *Store) Delete(actor string) error {
	a, err := s.acquire(actor)
	if err != nil {
		return err
	}
	defer s.release(a)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
	a.loaded, a.st, a.bytes, a.fl = false, follow.State{}, 0, nil
	if err := os.Remove(a.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.failed = &failedError{actor: actor, cause: err}
		return a.failed
	}
	s.mu.Lock()
	s.used -= s.files[actor]
	delete(s.files, actor)
	s.mu.Unlock()
	if err := fsync.Dir(s.dir); err != nil {
		a.failed = &failedError{actor: actor, cause: err}
		return a.failed
	}
	a.failed, a.loaded = nil, true
	return nil
}

func clip(st follow.State) follow.State {
	st.Entries = slices.Clip(st.Entries)
	return st
}

// acquire returns actor's entry, in use until release.
func (s *Store) acquire(actor string) (*tail, error) {
	if !follow.ValidActor(actor) {
		return nil, fmt.Errorf("%w: actor name of %d bytes (1 to %d)", ErrInvalid, len(actor), follow.MaxActorBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	a := s.actors[actor]
	if a == nil {
		a = &tail{name: actor, path: s.tailPath(actor)}
		s.actors[actor] = a
	}
	if a.elem != nil {
		s.lru.Remove(a.elem)
		s.cached -= a.bytes
		a.elem = nil
	}
	a.refs++
	s.busy++
	return a, nil
}

// release ends a use of a. An actor not in use stays in memory, least
// recently used first out, within CacheBytes and MaxOpen; one that failed
// stays until Close, to be refused.
func (s *Store) release(a *tail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.refs--
	if s.busy--; s.busy == 0 {
		s.idle.Broadcast()
	}
	if a.refs > 0 || a.failed != nil {
		return
	}
	if !a.loaded {
		delete(s.actors, a.name)
		return
	}
	a.elem = s.lru.PushBack(a)
	s.cached += a.bytes
	for s.lru.Len() > 0 && (s.lru.Len() > s.cfg.MaxOpen || s.cached > s.cfg.CacheBytes) {
		old := s.lru.Remove(s.lru.Front()).(*tail)
		s.cached -= old.bytes
		old.elem = nil
		delete(s.actors, old.name)
		if old.f != nil {
			old.f.Close()
		}
	}
}

// load reads a's file, if it has one and it is not in memory. The file is
// fsynced before it is read: what a process before this one wrote but
// did not sync is made durable, or fails, before it is trusted.
func (s *Store) load(a *tail) error {
	if a.failed != nil {
		return a.failed
	}
	if a.loaded {
		return nil
	}
	s.mu.Lock()
	_, ok := s.files[a.name]
	s.mu.Unlock()
	if !ok {
		a.loaded = true
		return nil
	}
	f, err := os.OpenFile(a.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("tails: %w", err)
	}
	r, err := readSynced(f, a.path, a.name, s.cfg.Limits)
	if err == nil && r.torn != nil {
		s.log.Warn("dropped a torn last record, never acknowledged", logattr.Actor, a.name, logattr.File, a.path, "at", r.end, logattr.Why, r.torn)
		// Later records must follow the last whole one.
		if err = f.Truncate(r.end); err == nil {
			err = f.Sync()
		}
		if err != nil {
			err = fmt.Errorf("tails: cutting the torn record off %s: %w", a.path, err)
		}
	}
	if err == nil {
		_, err = follow.OpenFollower(r.st, s.cfg.Limits)
		if err != nil {
			err = fmt.Errorf("tails: %s: %w", a.path, err) // a bug: readFile checks what OpenFollower does
		}
	}
	if err != nil {
		f.Close()
		return err
	}
	s.mu.Lock()
	s.used += r.end - s.files[a.name]
	s.files[a.name] = r.end
	s.mu.Unlock()
	a.f, a.size, a.st, a.bytes, a.loaded = f, r.end, r.st, r.bytes, true
	return nil
}

func readSynced(f *os.File, path, actor string, lim follow.Limits) (readResult, error) {
	if err := f.Sync(); err != nil {
		return readResult{}, fmt.Errorf("tails: fsync %s: %w", path, err)
	}
	info, err := f.Stat()
	if err != nil {
		return readResult{}, fmt.Errorf("tails: %w", err)
	}
	return readFile(io.ReaderAt(f), info.Size(), path, actor, lim)
}

// tailPath is actor's file.
func (s *Store) tailPath(actor string) string { return filepath.Join(s.dir, fileName(actor)) }
