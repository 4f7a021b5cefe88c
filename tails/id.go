package tails

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fsync"
)

// idFile holds the store's ID: the name its follower has in every actor's
// follower set (own.json) and on the transport.
const idFile = "follower.id"

// genFile holds the store's identity generation (Generation), in decimal;
// no file: 0.
const genFile = "follower.gen"

// A follower is its store (follow.FollowerID): a process that restarts on the
// store is the same follower, with everything it acknowledged, although
// it registers a new node. So the ID belongs to the directory, drawn
// once when the store is created, and a store that is lost or wiped comes
// back with a new one (follow's rule: a reused ID would count commits
// nobody holds).

// A directory can be copied, though: a restored backup, a cloned machine,
// a copy made while the node ran. Two stores with one ID would be one
// follower to the owners, and a promise given by one would be counted for
// the other. So the store also keeps a generation, which its node records
// in the bucket at every open (fence.OpenIdentity: a write conditional on
// the record holding the store's generation), and a store whose
// generation is not the bucket's takes a new ID (Reidentify).

// ID returns the store's follower ID: 16 lowercase hex digits, a valid
// node ID (frames.ValidNodeID), the same for as long as the directory
// lives and is not found to be a copy (Reidentify).
func (s *Store) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Generation is the store's identity generation, as its node last recorded
// it in the bucket (SetGeneration); 0 for a store never recorded.
func (s *Store) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// SetGeneration makes gen the store's generation, durably, before it
// returns.
func (s *Store) SetGeneration(gen uint64) error {
	if err := writeAtomic(s.dir, genFile, []byte(strconv.FormatUint(gen, 10)+"\n")); err != nil {
		return err
	}
	s.mu.Lock()
	s.gen = gen
	s.mu.Unlock()
	return nil
}

// Reidentify gives the store a new ID, durably, and generation 0, and
// returns the old ID: for a store found to be a copy. It keeps the actors'
// files. As the new follower, the store is in no follower set, so nothing
// it holds counts until an owner chooses it, and then it holds what its
// files hold: entries an owner sent, chained and checked as any others
// (follow), which it may acknowledge as the new follower because it has
// them. Call it before the store serves anyone.
func (s *Store) Reidentify() (string, error) {
	id, err := newID()
	if err != nil {
		return "", err
	}
	if err := writeAtomic(s.dir, idFile, []byte(id+"\n")); err != nil {
		return "", err
	}
	if err := s.SetGeneration(0); err != nil {
		return "", err
	}
	s.mu.Lock()
	old := s.id
	s.id = id
	s.mu.Unlock()
	s.log.Warn("follower store takes a new ID: it is a copy of another", "old", old, "new", id)
	return old, nil
}

// loadGeneration reads dir's generation: 0 when there is none; one that
// does not parse is an error naming the file.
func loadGeneration(dir string) (uint64, error) {
	path := filepath.Join(dir, genFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("tails: %w", err)
	}
	text := strings.TrimSuffix(string(b), "\n")
	gen, err := strconv.ParseUint(text, 10, 64)
	if err != nil || strconv.FormatUint(gen, 10) != text {
		return 0, fmt.Errorf("tails: %s holds %q, not a generation (%w)", path, b, frames.ErrCorrupt)
	}
	return gen, nil
}

// loadID reads dir's ID, or draws one and makes it durable (written to a
// temporary file, fsynced, renamed, the directory fsynced) when there is
// none. One that does not parse is an error naming the file: the store
// must not come back as another follower while its files hold the old
// one's acknowledgements.
func loadID(dir string) (string, error) {
	path := filepath.Join(dir, idFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSuffix(string(b), "\n")
		if len(id) != 16 || !frames.ValidNodeID(id) || strings.Trim(id, "0123456789abcdef") != "" {
			return "", fmt.Errorf("tails: %s holds %q, not a follower ID of 16 hex digits (%w)", path, b, frames.ErrCorrupt)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("tails: %w", err)
	}
	id, err := newID()
	if err != nil {
		return "", err
	}
	if err := writeAtomic(dir, idFile, []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

func newID() (string, error) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("tails: %w", err)
	}
	return hex.EncodeToString(raw[:]), nil
}

// writeAtomic replaces dir's file name with b durably: written to a
// temporary file, fsynced, renamed, the directory fsynced.
func writeAtomic(dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := writeSynced(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tails: %w", err)
	}
	if err := fsync.Dir(dir); err != nil {
		return fmt.Errorf("tails: %w", err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("tails: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tails: writing %s: %w", path, err)
	}
	return nil
}
