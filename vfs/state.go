package vfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/framectl/framectl/frames"
)

// localState is state.json beside the database: what the bucket is known to
// hold of this database. It lets a restart tell whether the local copy is
// current (same epoch, frame and checksum as the bucket) instead of
// downloading the database again. It is written after every upload and is a
// lower bound: the database file may be ahead of it (commits captured but not
// yet uploaded when the process stopped).
type localState struct {
	Version int    `json:"version"`
	Epoch   uint64 `json:"epoch"`
	Seq     uint64 `json:"seq"` // last sequence known to be in the bucket
	// CommitTime is the commit time of frame Seq (Unix ns, 0 if unknown),
	// for the next session's first snapshot.
	CommitTime int64  `json:"commitTime"`
	Checksum   string `json:"checksum"` // database checksum at Seq, 16 hex digits
	Pages      uint32 `json:"pages"`    // database size at Seq
	PageSize   uint32 `json:"pageSize"`
}

const (
	stateFile    = "state.json"
	databaseFile = "db.sqlite"
	stateVersion = 1
)

func readState(dir string) (localState, bool, error) {
	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return localState{}, false, nil
	}
	if err != nil {
		return localState{}, false, err
	}
	var s localState
	if err := json.Unmarshal(b, &s); err != nil {
		return localState{}, false, fmt.Errorf("vfs: %s: %w", path, err)
	}
	if s.Version != stateVersion {
		return localState{}, false, fmt.Errorf("vfs: %s: unknown version %d", path, s.Version)
	}
	return s, true, nil
}

// writeState replaces state.json atomically. It does not fsync: the state
// is a hint that a power loss may roll back, never ahead of the bucket.
func writeState(dir string, s localState) error {
	s.Version = stateVersion
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

func checksumHex(c frames.Checksum) string { return fmt.Sprintf("%016x", uint64(c)) }
