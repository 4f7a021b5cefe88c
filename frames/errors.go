package frames

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDamage is the one answer to "is this damage?": every error that means
// a stored object is corrupt, missing or inconsistent matches it with
// errors.Is, whichever package found it, and every error that does not
// mean that does not match it. The CLI exits 1 on it (cmd/framectl),
// compaction deletes nothing around it (package compact), verification
// reports it as damage (restore.Verify).
//
// Damage is what the stored bytes say, read back:
//
//   - an object that does not decode to its verified end: corrupt (bad
//     checksum, header or field, stored under a key it does not belong
//     to, trailing bytes), truncated, larger than the decoder's Limits
//     allow (whose defaults are well past anything the writer makes)
//     (ErrCorrupt, ErrTruncated, ErrTooLarge), or of a kind or format
//     version this build does not know (ErrUnknownKind: it cannot vouch
//     for what it cannot read, so nothing is deleted on its account);
//   - an object missing although another one names it: a chunk its
//     manifest names (chunks.ErrMissing), frames of the log between a
//     snapshot and the batches after it (lanes.ErrGap), the newest commits
//     of a session its own.json or its successor says it reached
//     (restore.ErrTailMissing);
//   - objects inconsistent with each other: a checksum chain that breaks
//     (lanes.ErrChecksum), a replay that fails integrity_check
//     (restore.ErrIntegrity), an own.json that names an epoch older than
//     a session in the bucket (restore.ErrOwnMismatch);
//   - a record that does not parse: own.json (fence.ErrBadRecord), a node
//     lease or a key under nodes/ that is not one (fence.ErrBadLease).
//
// Not damage, whatever else the error says: an I/O error (the network, a
// disk, permissions, a body cut short in transfer), an object that does
// not exist and that nothing names, or that vanished while it was read
// (bucket.ErrNotFound: compaction deletes objects), a cancelled or expired
// context, a caller's mistake (ErrInvalid). They are about reaching the
// bucket, not about what it holds. An error that matches ErrDamage wraps
// none of them: a chunk a manifest names that the bucket answers 404 for
// is chunks.ErrMissing, with the bucket's answer as text only.
//
// A sentinel of one kind of damage is made with NewDamage and matches
// ErrDamage itself, so the errors wrapping it do too. A condition that is
// damage only where it is found is marked there, with Damaged, by the
// code that knows: a bucket.ErrTooLarge is damage from reading own.json, a
// lease, or a batch larger than its listed size, and is not from a put
// too large for the backend to make conditional.
//
// The decoders' sentinels match ErrDamage whatever they decoded: a
// message from a peer (packages follow, peer) or a follower's tail file
// (package tails) that does not decode matches it too.
var ErrDamage = errors.New("damaged")

// NewDamage returns a sentinel error with the given text that matches
// ErrDamage: how a package declares a kind of damage of its own
// (lanes.ErrGap, chunks.ErrMissing). Its message is text alone.
func NewDamage(text string) error { return &damage{err: errors.New(text)} }

// Damaged returns err marked as damage: an error with err's message that
// matches ErrDamage besides everything err matches (nil for nil, err
// itself when it matches ErrDamage already). It is for a condition that is
// damage only in the context where it was found (see ErrDamage).
func Damaged(err error) error {
	if err == nil || errors.Is(err, ErrDamage) {
		return err
	}
	return &damage{err: err}
}

// damage is err as damage.
type damage struct{ err error }

func (d *damage) Error() string   { return d.err.Error() }
func (d *damage) Unwrap() []error { return []error{d.err, ErrDamage} }

// Sentinels for errors.Is. Every error from a decoder matches exactly one of
// them (io errors from the underlying reader are wrapped as they are). All
// but ErrInvalid are damage: they match ErrDamage.
var (
	// ErrCorrupt: the bytes are not something the encoder produced (bad
	// checksum, bad header, invalid field, broken chain, trailing bytes).
	ErrCorrupt = NewDamage("corrupt")
	// ErrTruncated: the object ends early.
	ErrTruncated = NewDamage("truncated")
	// ErrTooLarge: the object claims or holds more than the Limits allow.
	ErrTooLarge = NewDamage("too large")
	// ErrUnknownKind: a union tag, lane kind or format version this build
	// does not know (possibly written by a newer framectl).
	ErrUnknownKind = NewDamage("unknown kind")
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

// PrintsKey reports whether key is the one the error names (KeyPrinter).
func (e *Error) PrintsKey(key string) bool { return e.Key != "" && e.Key == key }

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

// KeyPrinter is an error whose message names the object it concerns: the
// errors of packages frames, bucket, lanes, chunks, fence, restore and
// compact. An error that prints the key of its object asks PrintsKey of
// what it wraps first (KeyText does), so that a message names each object
// once.
type KeyPrinter interface {
	// PrintsKey reports whether the error's message names key, printed by
	// the error itself or by one it wraps.
	PrintsKey(key string) bool
}

// KeyText is how the message of an error about the object key names it
// before the message of err, the error it wraps: " "+key, or "" when key is
// "" or err prints it already (PrintsKey), so that each object is named
// once however deep the wrapping.
func KeyText(key string, err error) string {
	if key == "" || PrintsKey(err, key) {
		return ""
	}
	return " " + key
}

// PrintsKey reports whether err's message names key already: whether err,
// or an error it wraps (as errors.Is walks them), is a KeyPrinter that
// prints key. It relies on every error of the module printing the errors
// it wraps (sentinels aside). An empty key is never printed.
func PrintsKey(err error, key string) bool {
	if err == nil || key == "" {
		return false
	}
	if kp, ok := err.(KeyPrinter); ok && kp.PrintsKey(key) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return PrintsKey(u.Unwrap(), key)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if PrintsKey(e, key) {
				return true
			}
		}
	}
	return false
}
