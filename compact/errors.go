package compact

import (
	"errors"
	"strings"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// ErrRaced: objects the pass listed kept vanishing while it read them
// (another compactor, or a tier pass, deleting them) and it gave up after
// maxAttempts listings. Nothing was deleted by this pass; the other one is
// doing the work. It wraps the last bucket.ErrNotFound.
var ErrRaced = errors.New("compact: objects vanished while the pass read them (another compaction running?)")

// Error is a failed step of a pass, with the actor and the object it
// concerns: every error Actor returns is or wraps one, so a caller of
// Namespace tells whose pass failed with errors.As. Match the cause with
// errors.Is: bucket.ErrNotFound and the bucket's other sentinels,
// frames.ErrCorrupt and its kin for a damaged object, lanes.ErrGap and
// lanes.ErrChecksum for a log that does not replay, fence.ErrBadRecord for a
// damaged own.json.
type Error struct {
	Op    string       // "read own.json", "list", "read snapshot", "replay", "verify", "write snapshot", "upload", "delete", "collect"
	Actor frames.Actor // zero for a listing of a namespace
	Key   string       // the object (for list: the actor's or the namespace's prefix); "" for delete
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("compact: ")
	b.WriteString(e.Op)
	switch {
	case e.Key == "" && e.Actor.Actor != "":
		b.WriteString(" ")
		b.WriteString(e.Actor.Prefix())
	case e.Key != "" && !printsKey(e.Err, e.Key):
		b.WriteString(" ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// printsKey reports whether err prints key already, so that Error does not
// print it twice: the errors of bucket, frames and restore carry the key
// they print (a *restore.Error of a listing, the prefix listed), and fence
// prints own.json's key in every error matching fence.ErrBadRecord
// (fence/read.go, fence/record.go).
func printsKey(err error, key string) bool {
	var (
		be *bucket.Error
		fe *frames.Error
		re *restore.Error
	)
	switch {
	case errors.As(err, &be) && be.Key == key,
		errors.As(err, &fe) && fe.Key == key,
		errors.As(err, &re) && (re.Key == key || re.Key == "" && re.Actor == key):
		return true
	}
	k, perr := frames.ParseKey(key)
	return perr == nil && k.Kind == frames.KeyOwn && errors.Is(err, fence.ErrBadRecord)
}
