package bucket

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// keyLocks is the in-process half of the directory bucket's key locks: a
// goroutine waiting for one key holds nothing that another key needs.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

// keyLock is one key's turn. ch (capacity 1) is full while a goroutine
// holds the key: a channel rather than a mutex so that waiting honours the
// context. refs counts holders and waiters; the entry goes at zero.
type keyLock struct {
	ch   chan struct{}
	refs int
}

func (l *keyLocks) acquire(ctx context.Context, key string) (release func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	drop := func() {
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}

// lock takes key's lock: its turn among this Dir's goroutines, then the
// file lock that orders processes (and other Dirs on the same root), see
// Locks on Dir. The lock file is opened per commit, so that each commit
// has an open file description of its own and a bucket needs no Close.
func (d *Dir) lock(ctx context.Context, key string) (unlock func(), err error) {
	release, err := d.locks.acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(d.lockPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = d.missing(err); !errors.Is(err, ErrNoBucket) {
			if err = os.MkdirAll(d.tmpDir(), 0o755); err == nil {
				f, err = os.OpenFile(d.lockPath(), os.O_RDWR|os.O_CREATE, 0o644)
			}
		}
	}
	if err != nil {
		release()
		return nil, err
	}
	// Poll rather than block: a blocking wait cannot be given up when the
	// context ends, and a holder may be stopped (SIGSTOP) for good. The
	// lock is held for a rename and a few lstats, so a short poll finds
	// it free almost at once.
	wait := 100 * time.Microsecond
	for {
		busy, err := tryLockFile(f, key)
		if err != nil {
			f.Close()
			release()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if !busy {
			break
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 20*time.Millisecond)
		case <-ctx.Done():
			f.Close()
			release()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), ctx.Err())
		}
	}
	return func() {
		// Unlock before closing: a child forked meanwhile (exec.Cmd) may
		// share the open file description until it execs.
		unlockFile(f, key)
		f.Close()
		release()
	}, nil
}
