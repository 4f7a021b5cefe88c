package main

import (
	"context"
	"errors"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// Exit codes. Scripts may rely on them: they are part of the CLI.
const (
	exitOK       = 0   // success; verify: the bucket is clean
	exitDamage   = 1   // damage (frames.ErrDamage) found by verify or inspect, or an operation failed on it
	exitUsage    = 2   // the command line is wrong
	exitIO       = 3   // the bucket is unreachable, or an I/O error
	exitNotFound = 4   // the bucket, actor, session or object does not exist, or a restore target is out of range
	exitSignal   = 130 // interrupted (SIGINT/SIGTERM); 128 + SIGINT, as shells report it
)

// exitCodesHelp documents the exit codes in `framectl help`.
const exitCodesHelp = `Exit codes:
  0    success; verify: no damage found (warnings allowed)
  1    damage: an object in the bucket is corrupt, truncated, of a format
       this build does not know, missing although another object names
       it, or inconsistent with the others (a gap or a broken checksum
       chain in the log, an own.json or node lease that does not parse),
       found by verify or inspect, or the operation failed on it. An I/O
       error (3), an object that nothing names and that does not exist
       (4) and an interruption (130) are not damage
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

// exitCode maps an operation's error to the exit code a script sees.
// Damage is frames.ErrDamage's answer, of whichever package found it. It
// is checked before absence: a restore that failed because a batch was
// missing in the middle of the log reports a gap (1), not a 404.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitSignal
	case errors.Is(err, frames.ErrDamage):
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
