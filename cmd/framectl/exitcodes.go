package main

import (
	"context"
	"errors"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
)

// Exit codes. Scripts may rely on them: they are part of the CLI.
const (
	exitOK       = 0   // success; verify: the bucket is clean
	exitDamage   = 1   // damage found (verify), or an operation failed on bad data
	exitUsage    = 2   // the command line is wrong
	exitIO       = 3   // the bucket is unreachable, or an I/O error
	exitNotFound = 4   // the bucket, actor, session or object does not exist, or a restore target is out of range
	exitSignal   = 130 // interrupted (SIGINT/SIGTERM); 128 + SIGINT, as shells report it
)

// exitCodesHelp documents the exit codes in `framectl help`.
const exitCodesHelp = `Exit codes:
  0    success; verify: no damage found (warnings allowed)
  1    damage: found by verify or inspect, or the operation failed on bad
       data in the bucket (restore: a gap, a checksum mismatch, a corrupt
       object)
  2    usage: a flag or argument is wrong or missing
  3    io: the bucket is unreachable, or an I/O error (network, disk,
       permissions)
  4    not-found: no such bucket, actor, session, snapshot or object, or a restore
       target outside what the session holds (restore --nearest)
  130  interrupted: SIGINT or SIGTERM

With --json, stdout holds exactly one JSON document whatever the outcome.
When the exit code is not 0 it has a member
  "error": {"code": 4, "kind": "not-found", "message": "..."}
whose kind is the word after the code above, beside the command's report
when it has one (verify's damage, restore --all's failed actors).`

// errNotFound marks "the thing asked for does not exist" errors made here
// (an actor without objects, a namespace without actors).
var errNotFound = errors.New("not found")

// errDamage marks damage this package detected on its own (an unparsable
// node lease, an object that is not where its key says).
var errDamage = errors.New("damaged")

// damageErrors are the sentinels that mean "the bucket holds bad data".
var damageErrors = []error{
	errDamage,
	frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind,
	lanes.ErrGap, lanes.ErrChecksum, lanes.ErrCorrupt,
	fence.ErrBadRecord, fence.ErrBadLease,
	bucket.ErrTooLarge, // an own.json or lease larger than any record
	restore.ErrIntegrity, restore.ErrOwnMismatch,
	chunks.ErrMissing, // a chunk a manifest names: damage, not a 404
}

// exitCode maps an operation's error to the exit code a script sees.
// Damage is checked before absence: a restore that failed because a batch
// was missing in the middle of the log reports a gap (1), not a 404.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitSignal
	case isDamage(err):
		return exitDamage
	case errors.Is(err, restore.ErrDestination):
		return exitUsage // --out names something restore will not replace
	case errors.Is(err, restore.ErrReplans), errors.Is(err, compact.ErrRaced):
		return exitIO // objects kept vanishing: transient, try again
	case errors.Is(err, errNotFound), errors.Is(err, bucket.ErrNotFound), errors.Is(err, bucket.ErrNoBucket),
		errors.Is(err, restore.ErrNoSnapshot), errors.Is(err, restore.ErrTargetOutOfRange):
		return exitNotFound
	}
	return exitIO
}

func isDamage(err error) bool {
	for _, target := range damageErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
