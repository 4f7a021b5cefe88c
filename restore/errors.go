package restore

import (
	"errors"
	"fmt"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// Sentinels for errors.Is. Damage found while restoring matches
// frames.ErrDamage, and the sentinel of the package that found it:
// frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge,
// frames.ErrUnknownKind, lanes.ErrGap (a *lanes.GapError names the missing
// range), lanes.ErrChecksum, fence.ErrBadRecord, chunks.ErrMissing (a chunk
// a manifest names is not in the bucket), or one of restore's own below:
// ErrIntegrity, ErrOwnMismatch and ErrTailMissing are damage, the others
// are not.
var (
	// ErrNoSnapshot: there is nothing to restore from. No session has a
	// snapshot, or a session holds batches but no snapshot (restoring an
	// older session would silently drop its frames). A session that has
	// snapshots but none at or before the target is ErrTargetOutOfRange.
	ErrNoSnapshot = errors.New("no snapshot to restore from")
	// ErrIntegrity: the restored database fails PRAGMA integrity_check
	// although every object and checksum verified. The messages SQLite
	// reported are in the error.
	ErrIntegrity = frames.NewDamage("integrity check failed")
	// ErrOwnMismatch: own.json parses but disagrees with the bucket (a
	// session newer than its epoch exists). It also matches
	// fence.ErrBadRecord: the record cannot be trusted.
	ErrOwnMismatch = frames.NewDamage("own.json disagrees with the bucket")
	// ErrReplans: objects kept vanishing (404) while restoring, more times
	// than Options.MaxReplans allows; compaction may be running in a
	// loop, or objects are being deleted. It also matches
	// bucket.ErrNotFound.
	ErrReplans = errors.New("objects vanished during restore too many times")
	// ErrDestination: the destination cannot be replaced safely (a
	// directory, or a database with a -wal or -journal file beside it,
	// which SQLite would apply to the restored file).
	ErrDestination = errors.New("destination cannot be replaced")
	// ErrTargetOutOfRange: the target is outside what the chosen session
	// can restore (see Target). A *TargetError says what it can.
	ErrTargetOutOfRange = errors.New("target out of range")
	// ErrTailMissing: own.json records that a released session ended at a
	// sequence number its objects do not reach: its newest objects were
	// lost. A *TailError names the range; it also matches lanes.ErrGap.
	ErrTailMissing = frames.NewDamage("the session's newest commits are missing")
)

// TailError is a session whose objects end before the sequence number its
// release recorded (fence.Record.Seq), or before the one its successor
// continued from (the successor's manifests' lineage).
type TailError struct {
	Key        string       // own.json, or the successor's manifest
	Epoch      frames.Epoch // the session's; 0: no session has a snapshot
	ReachedSeq frames.Seq   // the newest sequence number the session's objects reach
	EndSeq     frames.Seq   // where own.json says the session ended, or its successor continued from
	// ContinuedBy is the successor whose lineage says where the session
	// ended (0: own.json says it).
	ContinuedBy uint64
}

func (e *TailError) Error() string {
	if e.ContinuedBy != 0 {
		return fmt.Sprintf("session %d ends at seq %d in the bucket, but session %d continued it from seq %d (%s): %v (its objects were lost)",
			e.Epoch, e.ReachedSeq, e.ContinuedBy, e.EndSeq, e.Key, e.Gap())
	}
	if e.Epoch == 0 {
		return fmt.Sprintf("no session holds a snapshot, but %s records the actor's history released at seq %d: %v (every object was lost)",
			e.Key, e.EndSeq, e.Gap())
	}
	return fmt.Sprintf("session %d ends at seq %d in the bucket, but %s records it released at seq %d: %v (its newest objects were lost)",
		e.Epoch, e.ReachedSeq, e.Key, e.EndSeq, e.Gap())
}

// Gap is the missing range.
func (e *TailError) Gap() *lanes.GapError {
	return &lanes.GapError{From: e.ReachedSeq + 1, To: e.EndSeq}
}

// Unwrap makes a *TailError match ErrTailMissing and lanes.ErrGap.
func (e *TailError) Unwrap() []error { return []error{ErrTailMissing, e.Gap()} }

// PrintsKey reports whether key is the object the error names
// (frames.KeyPrinter).
func (e *TailError) PrintsKey(key string) bool { return key == e.Key }

// TargetError is a target outside what the chosen session can restore. It
// matches ErrTargetOutOfRange.
type TargetError struct {
	Target Target       // as asked, OrNearest or not
	Epoch  frames.Epoch // the session's
	// FirstSeq and LastSeq are the oldest and the newest state the session
	// can restore: its oldest snapshot, its newest batch or snapshot.
	FirstSeq, LastSeq frames.Seq
	// For a time target: the oldest state the session can place in time,
	// EarliestSeq committed at EarliestTime (zero when no state of the
	// session records a commit time).
	EarliestSeq  frames.Seq
	EarliestTime time.Time

	before bool // the target is before the oldest state: an older session may hold it
}

func (e *TargetError) Error() string {
	t := e.Target.exact()
	holds := fmt.Sprintf("session %d holds seq %d..%d", e.Epoch, e.FirstSeq, e.LastSeq)
	if n, ok := t.Seq(); ok {
		if n > e.LastSeq {
			return fmt.Sprintf("%s is past the newest state: %s", t, holds)
		}
		return fmt.Sprintf("%s is before the oldest snapshot: %s", t, holds)
	}
	if e.EarliestTime.IsZero() {
		return fmt.Sprintf("%s cannot be placed: no state of session %d records when it was committed (it holds seq %d..%d)",
			t, e.Epoch, e.FirstSeq, e.LastSeq)
	}
	return fmt.Sprintf("%s is before the oldest state the session can place in time, seq %d committed at %s: %s",
		t, e.EarliestSeq, e.EarliestTime.UTC().Format(time.RFC3339Nano), holds)
}

func (e *TargetError) Unwrap() error { return ErrTargetOutOfRange }

// Error is a restore, replay, verify or listing failure, with the actor,
// session and object it concerns.
type Error struct {
	Op    string       // "restore", "replay", "plan", "verify", "list"
	Actor string       // the actor's prefix, do/<ns>/<actor>/ (for Actors: the namespace's, do/<ns>/)
	Epoch frames.Epoch // the session's; 0 when not known yet
	Key   string       // the object concerned, when there is one
	Err   error
}

func (e *Error) Error() string {
	msg := "restore: " + e.Op
	if e.Actor != "" && e.Key == "" {
		msg += " " + e.Actor
	}
	if e.Epoch != 0 {
		msg += fmt.Sprintf(" session %d", e.Epoch)
	}
	return msg + frames.KeyText(e.Key, e.Err) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// PrintsKey reports whether key is the object the error names, or, for
// an error with no object, the actor's prefix (frames.KeyPrinter).
func (e *Error) PrintsKey(key string) bool {
	return e.Key != "" && key == e.Key || e.Key == "" && e.Actor != "" && key == e.Actor
}
