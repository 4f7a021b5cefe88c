package vfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// position is a point in an actor's history: a sequence number and the
// commit time of that frame (Unix ns; 0 when unknown, as for the empty
// database before the first commit).
type position struct {
	seq        uint64
	commitTime int64
}

// bringUpToDate makes the file at path the state the new session starts
// from, and returns where in the actor's history that state is.
//
//   - The bucket holds nothing for the actor: the local file (if any) is the
//     state; a new actor starts empty at sequence 0.
//   - state.json names the bucket's newest session and its last frame, and
//     the local file has the checksum state.json recorded for it: the local
//     copy is current, keep it (no download).
//   - Otherwise: restore the newest session that has a snapshot over the
//     local file (the local copy may be stale, or ahead with commits that
//     were never acknowledged: either way the bucket is the truth).
func bringUpToDate(ctx context.Context, cfg Config, a frames.Actor, path string) (position, error) {
	inv, err := restore.Take(ctx, cfg.Bucket, a)
	if err != nil {
		return position{}, err
	}
	for _, s := range inv.Sessions {
		if s.Epoch >= cfg.Epoch && (len(s.Snapshots) > 0 || len(s.Batches) > 0) {
			return position{}, fmt.Errorf("vfs: epoch %d is not newer than session %d already in %s for actor %s", cfg.Epoch, s.Epoch, cfg.Bucket, a.Prefix())
		}
	}
	newest, ok := inv.NewestWithSnapshot()
	if !ok {
		// A new actor, or one whose only data is local: the local state
		// (if any) is the start, its history unknown to the bucket.
		return position{}, nil
	}
	last := newest.Snapshots[len(newest.Snapshots)-1].Frame
	if n := len(newest.Batches); n > 0 {
		last = max(last, newest.Batches[n-1].Frame)
	}
	state, found, err := readState(cfg.Dir)
	if err != nil {
		cfg.Logger.Warn("ignoring unreadable local state", logErr, err)
		found = false
	}
	if found && state.Epoch == newest.Epoch && state.Seq == last {
		if err := prepareDatabase(ctx, path, cfg.PageSize); err == nil {
			if t, err := trackDatabase(ctx, path); err == nil && checksumHex(t.Checksum()) == state.Checksum {
				cfg.Logger.Info("local copy is current", logActor, a.Actor, logEpoch, newest.Epoch, logSeq, last)
				return position{last, state.CommitTime}, nil
			}
		}
	}
	if err := removeWAL(path); err != nil {
		return position{}, err
	}
	res, err := restore.Restore(ctx, cfg.Bucket, a, path, restore.Options{Logger: cfg.Logger})
	if err != nil {
		return position{}, fmt.Errorf("vfs: restoring actor %s: %w", a.Prefix(), err)
	}
	cfg.Logger.Info("restored from the bucket", logActor, a.Actor, "session", res.Session, logSeq, res.Frame, "bytes", res.Bytes)
	var commitTime int64
	if !res.CommitTime.IsZero() {
		commitTime = res.CommitTime.UnixNano()
	}
	return position{res.Frame, commitTime}, nil
}

// removeWAL deletes the WAL and shared-memory files of a stale local copy
// before a restore replaces the database file (restore renames the new file
// into place only once it verified): a WAL left beside the restored file
// would be replayed into it by the next connection.
func removeWAL(path string) error {
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("vfs: %w", err)
		}
	}
	return nil
}
