package lanes

import (
	"errors"
	"fmt"

	"github.com/framectl/framectl/frames"
)

// Sentinels for errors.Is. Every error from this package that is about
// content matches one of them; I/O errors are wrapped as they are. ErrGap,
// ErrChecksum and ErrCorrupt are damage: they match frames.ErrDamage.
var (
	// ErrGap: a frame starts past the next sequence number; the frames in
	// between are missing. The error is a *GapError naming them.
	ErrGap = frames.NewDamage("gap in the sequence numbers")
	// ErrChecksum: a frame's checksum before does not match the lane (the
	// chain is broken), its checksum after does not match the lane once
	// applied, or a lane file does not hold what the Set tracked.
	ErrChecksum = frames.NewDamage("checksum mismatch")
	// ErrCorrupt is frames.ErrCorrupt: a frame or snapshot that decodes but
	// cannot apply to the state (a lane that does not exist, a page size
	// change, growth past MaxUnwrittenPages) is damage of the same kind as
	// one that does not decode, and a caller asking "is the bucket damaged?"
	// asks once.
	ErrCorrupt = frames.ErrCorrupt
	// ErrBroken: an earlier failure left the Set half-changed (a frame part
	// applied, a batch that did not verify, a failed write or sync), or the
	// Set is closed. The Set must be discarded. It is not damage by itself:
	// the error wraps the failure, which may be.
	ErrBroken = errors.New("set is unusable")
)

// GapError names the sequence numbers missing before a frame.
type GapError struct {
	From, To frames.Seq // missing range, inclusive
}

func (e *GapError) Error() string {
	if e.From == e.To {
		return fmt.Sprintf("sequence number %d is missing", e.From)
	}
	return fmt.Sprintf("sequence numbers %d..%d are missing", e.From, e.To)
}

// Is makes a *GapError match ErrGap, and so frames.ErrDamage.
func (e *GapError) Is(target error) bool { return errors.Is(ErrGap, target) }

// Error is a failure of one operation on a Set, with the object and the
// frame it concerns.
type Error struct {
	Op       string     // "open", "apply", "replay", "load snapshot", "write snapshot", "verify", "sync", "close", "track"
	Key      string     // the batch or snapshot object, when known
	FirstSeq frames.Seq // the frame concerned; both 0 when the error is not about a frame
	LastSeq  frames.Seq
	Err      error
}

func (e *Error) Error() string {
	msg := "lanes: " + e.Op + frames.KeyText(e.Key, e.Err)
	if e.LastSeq != 0 {
		msg += fmt.Sprintf(": frame %d..%d", e.FirstSeq, e.LastSeq)
	}
	return msg + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// PrintsKey reports whether key is the object the error names
// (frames.KeyPrinter).
func (e *Error) PrintsKey(key string) bool { return e.Key != "" && e.Key == key }

// problem is the detail inside an *Error: a message and the sentinel it
// matches.
type problem struct {
	kind error
	msg  string
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return p.kind }

func corrupt(format string, args ...any) error {
	return &problem{kind: ErrCorrupt, msg: fmt.Sprintf(format, args...)}
}

func checksumError(format string, args ...any) error {
	return &problem{kind: ErrChecksum, msg: fmt.Sprintf(format, args...)}
}

func unknownKind(format string, args ...any) error {
	return &problem{kind: frames.ErrUnknownKind, msg: fmt.Sprintf(format, args...)}
}

// broken is what every call returns once the Set is unusable: it matches
// ErrBroken and the failure that caused it.
type broken struct{ cause error }

func (b *broken) Error() string   { return "unusable after an earlier failure: " + b.cause.Error() }
func (b *broken) Unwrap() []error { return []error{ErrBroken, b.cause} }

// errClosed is the cause recorded by Close.
var errClosed = errors.New("set is closed")
