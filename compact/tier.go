package compact

// The tier pass: once the current session has a snapshot, every older
// session is superseded and goes (retention permitting, see retention.go:
// a window keeps the part of older sessions the lineage reaches, and
// nothing else, lineage.go).
//
// The current session is the one own.json names. A claim writes own.json
// (epoch+1) first, then restores the newest session that has a snapshot,
// then uploads its own session's first snapshot. So:
//
//   - An older session is needed only until the current session has its
//     snapshot; after that, only a point-in-time restore within the window
//     reads it, and only up to the point its successor continued from.
//     The batches a fenced owner (a zombie whose lease ran out) uploaded
//     after the takeover are past that point: they were never
//     acknowledged, no restore reads them, and every pass deletes whatever
//     it adds later, window or not.
//   - A session newer than own.json's epoch is never deleted, nor compacted:
//     it is a claim in progress (own.json was rewritten after this pass read
//     it; the pass reads own.json before it lists, so a claim that began
//     after the read shows only as such a session), and its claimant is
//     restoring from the sessions this pass sees. A session past own.json
//     for any other reason (a writer that bypassed package fence) is not
//     this pass's to judge either: restore and verify report it.
//   - When the current session has no snapshot yet, its claimant is
//     restoring from an older one: the pass deletes nothing at all.
//   - Without own.json (a writer that runs without package fence, tests),
//     the current session is the newest that has a snapshot; newer sessions
//     without one are left alone for the same reason.
//   - An own.json that cannot be read or parsed stops the pass before
//     anything is deleted: guessing the current session could delete the
//     live one.

import (
	"context"
	"errors"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// readOwner reads and parses own.json; nil when it does not exist.
func readOwner(ctx context.Context, b bucket.Bucket, a frames.Actor) (*fence.Record, error) {
	rec, _, err := fence.ReadRecord(ctx, b, a)
	if errors.Is(err, bucket.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: "read own.json", Actor: a, Key: a.OwnKey(), Err: err}
	}
	return &rec, nil
}

// currentEpoch returns the epoch of the current session: own's epoch, or
// without own.json the newest session with a snapshot. ok is false when
// there is none (an actor with no snapshot anywhere and no own.json).
func currentEpoch(inv *restore.Inventory, own *fence.Record) (epoch frames.Epoch, ok bool) {
	if own != nil {
		return own.Epoch, true
	}
	if s, ok := inv.NewestWithSnapshot(); ok {
		return s.Epoch, true
	}
	return 0, false
}
