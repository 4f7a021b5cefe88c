package frames

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels for errors.Is. Every error from a decoder matches exactly one of
// them (io errors from the underlying reader are wrapped as they are).
var (
	// ErrCorrupt: the bytes are not something the encoder produced (bad
	// checksum, bad header, invalid field, broken chain, trailing bytes).
	ErrCorrupt = errors.New("corrupt")
	// ErrTruncated: the object ends early.
	ErrTruncated = errors.New("truncated")
	// ErrTooLarge: the object claims or holds more than the Limits allow.
	ErrTooLarge = errors.New("too large")
	// ErrUnknownKind: a union tag, lane kind or format version this build
	// does not know (possibly written by a newer framectl).
	ErrUnknownKind = errors.New("unknown kind")
	// ErrInvalid: a caller asked the encoder to write something invalid, or
	// to parse a string that is not a valid key or number. Not about damage.
	ErrInvalid = errors.New("invalid")
)

// Error is a failure to read or write one object (or parse one key).
type Error struct {
	Object string // "batch", "snapshot", "key", "number"
	Key    string // object key, file name, or the string parsed
	Err    error  // matches one of the sentinels
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("frames: ")
	b.WriteString(e.Object)
	if e.Key != "" {
		b.WriteString(" ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// problem is the detail inside an *Error: a message, the sentinel it
// matches, and optionally the lower-level cause (a flate error, say).
type problem struct {
	kind  error
	msg   string
	cause error
}

func (p *problem) Error() string {
	if p.cause != nil {
		return p.msg + ": " + p.cause.Error()
	}
	return p.msg
}

func (p *problem) Unwrap() []error {
	if p.cause != nil {
		return []error{p.kind, p.cause}
	}
	return []error{p.kind}
}

func corrupt(msg string) error               { return &problem{kind: ErrCorrupt, msg: msg} }
func truncated(msg string) error             { return &problem{kind: ErrTruncated, msg: msg} }
func tooLarge(msg string) error              { return &problem{kind: ErrTooLarge, msg: msg} }
func unknownKind(msg string) error           { return &problem{kind: ErrUnknownKind, msg: msg} }
func invalid(msg string) error               { return &problem{kind: ErrInvalid, msg: msg} }
func corruptCause(msg string, c error) error { return &problem{kind: ErrCorrupt, msg: msg, cause: c} }

// KeyMismatchError is a batch, snapshot, manifest or chunk whose header
// decodes but disagrees with the key the object is stored under. It matches
// ErrCorrupt. A flipped bit can turn a header into another one that
// decodes, and the batch and full-snapshot readers stop at the header,
// before the gzip trailer and the seal that would prove it: a reader that
// needs to know whether the stored bytes were altered or the object was put
// under a wrong key reads it again to its end without a key (NewBatchReader
// with key ""). Manifests and chunks are read whole, so their readers
// compare the key last, once the object verified to its end: from them
// this error means a sound object stored under the wrong key.
type KeyMismatchError struct {
	Key Key // the key, parsed
	// What the header says: the epoch, and the sequence numbers a batch
	// covers (FirstSeq..LastSeq) or the one a snapshot or manifest covers
	// through (FirstSeq = LastSeq).
	Epoch             Epoch
	FirstSeq, LastSeq Seq
	// For a chunk (Key.Kind KeyChunk): the hash of its content, which its
	// header declares too.
	Chunk ChunkHash
}

func (e *KeyMismatchError) Error() string {
	switch e.Key.Kind {
	case KeyChunk:
		return fmt.Sprintf("chunk stored under another chunk's key: its content has hash %s, the key names %s",
			e.Chunk, e.Key.Chunk)
	case KeySnapshot:
		return fmt.Sprintf("corrupt header: it says epoch %d, seq %d, the key says epoch %d, seq %d",
			e.Epoch, e.LastSeq, e.Key.Epoch, e.Key.Seq)
	}
	return fmt.Sprintf("corrupt header: it says epoch %d, seq %d..%d, the key says epoch %d, last seq %d",
		e.Epoch, e.FirstSeq, e.LastSeq, e.Key.Epoch, e.Key.Seq)
}

func (e *KeyMismatchError) Unwrap() error { return ErrCorrupt }
