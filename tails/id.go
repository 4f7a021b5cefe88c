package tails

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fsync"
)

// idFile holds the store's ID: the name its follower has in every actor's
// follower set (own.json) and on the transport.
const idFile = "follower.id"

// A follower is its store (follow.FollowerID): a process that restarts on the
// store is the same follower, with everything it acknowledged, although
// it registers a new node. So the ID belongs to the directory, drawn
// once when the store is created, and a store that is lost or wiped comes
// back with a new one (follow's rule: a reused ID would count commits
// nobody holds).

// ID returns the store's follower ID: 16 lowercase hex digits, a valid
// node ID (frames.ValidNodeID), the same for as long as the directory
// lives.
func (s *Store) ID() string { return s.id }

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
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("tails: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := writeSynced(tmp, []byte(id+"\n")); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("tails: %w", err)
	}
	if err := fsync.Dir(dir); err != nil {
		return "", fmt.Errorf("tails: %w", err)
	}
	return id, nil
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
