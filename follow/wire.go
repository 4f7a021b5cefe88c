package follow

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/framectl/framectl/frames"
)

// Part of the wire format (doc.go, "Wire format"): never change these.
const (
	wireVersion = 1
	// wireVersionActor is version 1 with the actor's bucket name after
	// the fixed fields of a Fence or an Append (Fence.Actor): the encoding
	// of those messages when they carry one. Version 1 stays the encoding
	// of every other message, so that the stores of followers (package
	// tails keeps these messages as its records) read as before.
	wireVersionActor = 2

	kindFence   = 1
	kindPromise = 2
	kindAppend  = 3
	kindAck     = 4
	kindRefuse  = 5

	flagReset = 1 // Append.Reset

	crcBytes    = 4
	headerBytes = 2 // version, kind
	pointBytes  = 16
	// maxFixedBytes bounds everything of a message but its entries: an
	// Append's version, kind, epoch, flags, two points, actor (2 +
	// MaxBucketActorBytes), entry count and CRC are 565 bytes.
	maxFixedBytes = 576
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendMessage appends the encoding of m to dst. It refuses (ErrInvalid)
// what the decoder would: epoch 0, entries not chained from their point, a
// log epoch past the promise, an unknown reason, a stale refusal that names
// no newer epoch, a message larger than lim allows.
func AppendMessage(dst []byte, m Message, lim Limits) ([]byte, error) {
	if err := checkMessage(m); err != nil {
		return dst, fmt.Errorf("%w: %T: %v", ErrInvalid, m, err)
	}
	start := len(dst)
	switch m := m.(type) {
	case *Fence:
		dst = append(dst, versionOf(m.Actor), kindFence)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Epoch))
		dst = appendActor(dst, m.Actor)
	case *Promise:
		dst = append(dst, wireVersion, kindPromise)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Epoch))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.LogEpoch))
		dst = appendPoint(dst, m.Base)
		dst = appendEntries(dst, m.Entries)
	case *Append:
		dst = append(dst, versionOf(m.Actor), kindAppend)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Epoch))
		var flags byte
		if m.Reset {
			flags |= flagReset
		}
		dst = append(dst, flags)
		dst = appendPoint(dst, m.Prev)
		dst = appendPoint(dst, m.Durable)
		dst = appendActor(dst, m.Actor)
		dst = appendEntries(dst, m.Entries)
	case *Ack:
		dst = append(dst, wireVersion, kindAck)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Epoch))
		dst = appendPoint(dst, m.End)
	case *Refuse:
		dst = append(dst, wireVersion, kindRefuse)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Epoch))
		dst = append(dst, byte(m.Reason))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Newest))
		dst = appendPoint(dst, m.End)
	}
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	if n := int64(len(dst) - start); n > lim.MaxMessageBytes() {
		return dst[:start], fmt.Errorf("%w: %T of %d bytes exceeds the message bound of %d", ErrInvalid, m, n, lim.MaxMessageBytes())
	}
	return dst, nil
}

// checkMessage is what both the encoder and the decoder require of a
// message's fields.
func checkMessage(m Message) error {
	if m == nil {
		return fmt.Errorf("no message")
	}
	if m.MsgEpoch() == 0 {
		return fmt.Errorf("epoch 0")
	}
	switch m := m.(type) {
	case *Fence:
		return checkActor(m.Actor)
	case *Ack:
	case *Promise:
		if m.LogEpoch > m.Epoch {
			return fmt.Errorf("log epoch %d past the promised epoch %d", m.LogEpoch, m.Epoch)
		}
		return checkEntries(m.Base, m.Entries)
	case *Append:
		if err := checkActor(m.Actor); err != nil {
			return err
		}
		return checkEntries(m.Prev, m.Entries)
	case *Refuse:
		if m.Reason < RefuseStale || m.Reason > RefuseUnproven {
			return fmt.Errorf("reason %d", m.Reason)
		}
		if m.Reason == RefuseStale && m.Newest <= m.Epoch {
			return fmt.Errorf("stale, but the newest epoch %d is not past %d", m.Newest, m.Epoch)
		}
	default:
		return fmt.Errorf("not a message of this package")
	}
	return nil
}

func checkEntries(p Point, es []Entry) error {
	for i := range es {
		if len(es[i].Body) > math.MaxUint32 {
			return fmt.Errorf("entry %d: body of %d bytes", i, len(es[i].Body))
		}
	}
	if !chained(p, es) {
		return fmt.Errorf("entries not chained from seq %d", p.Seq)
	}
	return nil
}

func checkActor(actor string) error {
	if len(actor) > MaxBucketActorBytes {
		return fmt.Errorf("actor of %d bytes, past %d", len(actor), MaxBucketActorBytes)
	}
	return nil
}

// versionOf is the version of a Fence or Append that carries actor.
func versionOf(actor string) byte {
	if actor == "" {
		return wireVersion
	}
	return wireVersionActor
}

// appendActor writes a Fence's or Append's actor, present in version 2
// only.
func appendActor(dst []byte, actor string) []byte {
	if actor == "" {
		return dst
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(actor)))
	return append(dst, actor...)
}

func appendPoint(dst []byte, p Point) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(p.Seq))
	return binary.LittleEndian.AppendUint64(dst, uint64(p.Chain))
}

func appendEntries(dst []byte, es []Entry) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(es)))
	for i := range es {
		e := &es[i]
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Seq))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Before))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.After))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.Body)))
		dst = append(dst, e.Body...)
	}
	return dst
}

// MessageError is a message that does not decode: who sent it, where in it
// the decoder stopped, and why, matching exactly one of frames.ErrCorrupt,
// frames.ErrTruncated, frames.ErrTooLarge and frames.ErrUnknownKind.
type MessageError struct {
	From   string // the peer it came from, as the caller named it
	Offset int    // byte offset of the field that failed
	Err    error
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("follow: message from %s: at byte %d: %v", e.From, e.Offset, e.Err)
}
func (e *MessageError) Unwrap() error { return e.Err }

// DecodeMessage decodes one message received from peer from, accepting only
// what AppendMessage produces: a known version and kind, every length
// checked against the bytes left before anything is allocated for it, the
// message within lim.MaxMessageBytes, no trailing bytes, the CRC-32C
// matching, and the rules of checkMessage. Entry bodies are copies: data
// may be reused once it returns.
func DecodeMessage(data []byte, from string, lim Limits) (Message, error) {
	fail := func(off int, sentinel error, format string, args ...any) (Message, error) {
		return nil, &MessageError{From: from, Offset: off, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)}
	}
	if int64(len(data)) > lim.MaxMessageBytes() {
		return fail(0, frames.ErrTooLarge, "%d bytes, past the message bound of %d", len(data), lim.MaxMessageBytes())
	}
	if len(data) < headerBytes+crcBytes {
		return fail(0, frames.ErrTruncated, "%d bytes, shorter than any message", len(data))
	}
	version := data[0]
	switch {
	case version == wireVersionActor && data[1] != kindFence && data[1] != kindAppend:
		return fail(0, frames.ErrUnknownKind, "version %d of message kind %d", version, data[1])
	case version != wireVersion && version != wireVersionActor:
		return fail(0, frames.ErrUnknownKind, "version %d", version)
	}
	// Bodies point into one copy of the message, made once its length is
	// known to be within the bound.
	body := append([]byte(nil), data[:len(data)-crcBytes]...)
	r := &reader{b: body, off: headerBytes}
	var m Message
	switch data[1] {
	case kindFence:
		f := &Fence{Epoch: frames.Epoch(r.u64("epoch"))}
		f.Actor = r.actor(version)
		m = f
	case kindPromise:
		p := &Promise{Epoch: frames.Epoch(r.u64("epoch")), LogEpoch: frames.Epoch(r.u64("log epoch")), Base: r.point("base")}
		p.Entries = r.entries()
		m = p
	case kindAppend:
		a := &Append{Epoch: frames.Epoch(r.u64("epoch"))}
		flagsAt := r.off
		flags := r.u8("flags")
		if r.err == nil && flags&^flagReset != 0 {
			return fail(flagsAt, frames.ErrCorrupt, "flags %#x", flags)
		}
		a.Reset = flags&flagReset != 0
		a.Prev, a.Durable = r.point("prev"), r.point("durable")
		a.Actor = r.actor(version)
		a.Entries = r.entries()
		m = a
	case kindAck:
		m = &Ack{Epoch: frames.Epoch(r.u64("epoch")), End: r.point("end")}
	case kindRefuse:
		m = &Refuse{Epoch: frames.Epoch(r.u64("epoch")), Reason: Reason(r.u8("reason")), Newest: frames.Epoch(r.u64("newest")), End: r.point("end")}
	default:
		return fail(1, frames.ErrUnknownKind, "message kind %d", data[1])
	}
	if r.err != nil {
		return nil, &MessageError{From: from, Offset: r.errAt, Err: r.err}
	}
	if r.off != len(body) {
		return fail(r.off, frames.ErrCorrupt, "%d bytes past the end of the message", len(body)-r.off)
	}
	if want, got := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(data[len(body):]); want != got {
		return fail(len(body), frames.ErrCorrupt, "CRC-32C %08x, the bytes give %08x", got, want)
	}
	if rf, ok := m.(*Refuse); ok && (rf.Reason < RefuseStale || rf.Reason > RefuseUnproven) {
		return fail(headerBytes+8, frames.ErrUnknownKind, "refusal reason %d", rf.Reason)
	}
	if err := checkMessage(m); err != nil {
		return fail(headerBytes, frames.ErrCorrupt, "%v", err)
	}
	return m, nil
}

// reader reads fields of a message, remembering the first failure.
type reader struct {
	b     []byte
	off   int
	err   error
	errAt int
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if left := len(r.b) - r.off; n > left {
		r.err, r.errAt = fmt.Errorf("%s: %d bytes, %d left: %w", what, n, left, frames.ErrTruncated), r.off
		return false
	}
	return true
}

func (r *reader) u8(what string) uint8 {
	if !r.need(1, what) {
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) u16(what string) uint16 {
	if !r.need(2, what) {
		return 0
	}
	r.off += 2
	return binary.LittleEndian.Uint16(r.b[r.off-2:])
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	r.off += 4
	return binary.LittleEndian.Uint32(r.b[r.off-4:])
}

func (r *reader) u64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	r.off += 8
	return binary.LittleEndian.Uint64(r.b[r.off-8:])
}

// actor reads the actor of a version 2 Fence or Append: a length of 1 to
// MaxBucketActorBytes (version 2 with none is not what the encoder
// writes), then the bytes.
func (r *reader) actor(version byte) string {
	if version != wireVersionActor {
		return ""
	}
	at := r.off
	n := int(r.u16("actor length"))
	if r.err == nil && (n == 0 || n > MaxBucketActorBytes) {
		r.err, r.errAt = fmt.Errorf("actor length %d, not 1 to %d: %w", n, MaxBucketActorBytes, frames.ErrCorrupt), at
	}
	if !r.need(n, "actor") {
		return ""
	}
	r.off += n
	return string(r.b[r.off-n : r.off])
}

func (r *reader) point(what string) Point {
	return Point{Seq: frames.Seq(r.u64(what + " seq")), Chain: frames.Checksum(r.u64(what + " chain"))}
}

// entries reads an entry list. The count is checked against the bytes
// left (every entry takes entryHeaderBytes at least) before the list is
// allocated, each body length before the body is sliced.
func (r *reader) entries() []Entry {
	at := r.off
	n := r.u32("entry count")
	if r.err != nil {
		return nil
	}
	if left := len(r.b) - r.off; int64(n)*entryHeaderBytes > int64(left) {
		r.err, r.errAt = fmt.Errorf("%d entries need %d bytes at least, %d left: %w", n, int64(n)*entryHeaderBytes, left, frames.ErrTruncated), at
		return nil
	}
	if n == 0 {
		return nil
	}
	es := make([]Entry, n)
	for i := range es {
		e := &es[i]
		e.Seq = frames.Seq(r.u64("entry seq"))
		e.Before = frames.Checksum(r.u64("entry before"))
		e.After = frames.Checksum(r.u64("entry after"))
		size := int(r.u32("entry body length"))
		if !r.need(size, fmt.Sprintf("entry %d body", i)) {
			return nil
		}
		if size > 0 {
			e.Body = r.b[r.off : r.off+size : r.off+size]
			r.off += size
		}
	}
	return es
}
