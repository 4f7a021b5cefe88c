package tails

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// readResult is what a file holds: the state, the bytes of its entries,
// and where its last whole record ends (end < the file's size: the bytes
// past end are a torn record, dropped).
type readResult struct {
	st    follow.State
	bytes int64
	end   int64
	torn  error // why the bytes past end were dropped
}

// readFile reads actor's file (size bytes of r, at path) and replays its
// records. Every length is checked against the limits and the bytes left
// before anything is allocated for it; what it holds at the end passes
// follow.OpenFollower's checks.
func readFile(r io.ReaderAt, size int64, path, actor string, lim follow.Limits) (readResult, error) {
	fr := &fileReader{path: path, size: size, r: r, lim: lim,
		br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(size, 64<<10)+16))}
	if err := fr.header(actor); err != nil {
		return readResult{}, err
	}
	var rp replay
	for n := 0; ; n++ {
		start := fr.off
		m, torn, err := fr.record(n == 0)
		if err != nil {
			return readResult{}, err
		}
		if torn != nil {
			return rp.result(start, torn), nil
		}
		if m == nil {
			return rp.result(start, nil), nil
		}
		if err := rp.apply(m, n == 0, lim); err != nil {
			return readResult{}, &FileError{Path: path, Offset: start, Err: fmt.Errorf("record %d: %w", n, err)}
		}
	}
}

type fileReader struct {
	path string
	size int64
	r    io.ReaderAt
	br   *bufio.Reader
	off  int64
	lim  follow.Limits
}

func (fr *fileReader) fail(off int64, sentinel error, format string, args ...any) error {
	return &FileError{Path: fr.path, Offset: off, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)}
}

// read reads n bytes at fr.off, which the caller checked are there.
func (fr *fileReader) read(b []byte) error {
	if _, err := io.ReadFull(fr.br, b); err != nil {
		return fmt.Errorf("tails: reading %s at byte %d: %w", fr.path, fr.off, err)
	}
	fr.off += int64(len(b))
	return nil
}

func (fr *fileReader) header(actor string) error {
	if fr.size < int64(len(fileMagic)+2) {
		return fr.fail(0, frames.ErrTruncated, "%d bytes, shorter than a file header", fr.size)
	}
	var b [len(fileMagic) + 2 + follow.MaxActorBytes + 4]byte
	if err := fr.read(b[:len(fileMagic)+2]); err != nil {
		return err
	}
	if string(b[:len(fileMagic)]) != fileMagic {
		return fr.fail(0, frames.ErrUnknownKind, "not a tails file (magic %q)", b[:len(fileMagic)])
	}
	if v := b[len(fileMagic)]; v != fileVersion {
		return fr.fail(int64(len(fileMagic)), frames.ErrUnknownKind, "file format version %d", v)
	}
	n := int(b[len(fileMagic)+1])
	if n == 0 || n > follow.MaxActorBytes {
		return fr.fail(int64(len(fileMagic)+1), frames.ErrCorrupt, "actor name of %d bytes", n)
	}
	total := headerFixedBytes + n
	if fr.size < int64(total) {
		return fr.fail(fr.off, frames.ErrTruncated, "%d bytes, shorter than its header of %d", fr.size, total)
	}
	if err := fr.read(b[len(fileMagic)+2 : total]); err != nil {
		return err
	}
	if want, got := crc32.Checksum(b[:total-4], castagnoli), binary.LittleEndian.Uint32(b[total-4:]); want != got {
		return fr.fail(int64(total-4), frames.ErrCorrupt, "header CRC-32C %08x, the bytes give %08x", got, want)
	}
	if got := string(b[len(fileMagic)+2 : total-4]); got != actor {
		return fr.fail(int64(len(fileMagic)+2), frames.ErrCorrupt, "holds actor %q, not %q its name says", got, actor)
	}
	return nil
}

// record reads the next record: nil at the end of the file; torn when
// what is left is a record a crash cut short (see "Torn writes" in the
// package doc), never for the first record (which came by rename, whole
// and fsynced); an error for anything else that fails.
func (fr *fileReader) record(first bool) (m follow.Message, torn error, err error) {
	start, left := fr.off, fr.size-fr.off
	maxBody := fr.lim.MaxMessageBytes()
	mayTear := func(format string, args ...any) error {
		if first {
			return nil
		}
		return fmt.Errorf("record at byte %d: %s", start, fmt.Sprintf(format, args...))
	}
	switch {
	case left == 0 && first:
		return nil, nil, fr.fail(start, frames.ErrTruncated, "no record after the header")
	case left == 0:
		return nil, nil, nil
	case left < recordHeaderBytes:
		if t := mayTear("%d bytes left, a record header takes %d", left, recordHeaderBytes); t != nil {
			return nil, t, nil
		}
		return nil, nil, fr.fail(start, frames.ErrTruncated, "%d bytes left, a record header takes %d", left, recordHeaderBytes)
	}
	var h [recordHeaderBytes]byte
	if err := fr.read(h[:]); err != nil {
		return nil, nil, err
	}
	n := int64(binary.LittleEndian.Uint32(h[:]))
	if want, got := crc32.Checksum(h[:4], castagnoli), binary.LittleEndian.Uint32(h[4:]); want != got {
		if !first && hasZeroSector(start, h[:]) && left <= recordHeaderBytes+maxBody {
			found, err := fr.recordAfter(start)
			if err != nil {
				return nil, nil, err
			}
			if !found {
				return nil, mayTear("header unwritten"), nil
			}
		}
		return nil, nil, fr.fail(start, frames.ErrCorrupt, "record header CRC-32C %08x, the length gives %08x", got, want)
	}
	switch {
	case n > maxBody:
		return nil, nil, fr.fail(start, frames.ErrTooLarge, "record of %d bytes, past the message bound of %d", n, maxBody)
	case n > left-recordHeaderBytes:
		if t := mayTear("%d bytes, %d left", n, left-recordHeaderBytes); t != nil {
			return nil, t, nil
		}
		return nil, nil, fr.fail(start, frames.ErrTruncated, "record of %d bytes, %d left", n, left-recordHeaderBytes)
	}
	body := make([]byte, n)
	if err := fr.read(body); err != nil {
		return nil, nil, err
	}
	m, err = follow.DecodeMessage(body, fr.path, fr.lim)
	if err != nil {
		if fr.off == fr.size && !first && (hasZeroSector(start, h[:]) || hasZeroSector(start+recordHeaderBytes, body)) {
			return nil, mayTear("%v, with a sector unwritten", err), nil
		}
		var me *follow.MessageError
		if errors.As(err, &me) {
			return nil, nil, &FileError{Path: fr.path, Offset: start + recordHeaderBytes + int64(me.Offset), Err: me.Err}
		}
		return nil, nil, fr.fail(start, frames.ErrCorrupt, "%v", err)
	}
	return m, nil, nil
}

// hasZeroSector reports whether b, which sits at byte off of the file,
// holds a piece between two sector boundaries (or its own ends) that is
// all zeros: a sector of an appended record that a crash left unwritten.
func hasZeroSector(off int64, b []byte) bool {
	for len(b) > 0 {
		n := int(min(int64(len(b)), sectorBytes-off%sectorBytes))
		zero := true
		for _, c := range b[:n] {
			if c != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true
		}
		off, b = off+int64(n), b[n:]
	}
	return false
}

// recordAfter reports whether a whole record (its header's CRC good, its
// message decoding) starts anywhere in the file past byte start: then a
// damaged header at start is damage in the middle, not a torn end. The
// caller checked that what is left is no more than one record's bound.
func (fr *fileReader) recordAfter(start int64) (bool, error) {
	rest := make([]byte, fr.size-start-1)
	if _, err := fr.r.ReadAt(rest, start+1); err != nil {
		return false, fmt.Errorf("tails: reading %s at byte %d: %w", fr.path, start+1, err)
	}
	for i := 0; i+recordHeaderBytes <= len(rest); i++ {
		h := rest[i : i+recordHeaderBytes]
		if crc32.Checksum(h[:4], castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
			continue
		}
		n := int(binary.LittleEndian.Uint32(h))
		if n > len(rest)-i-recordHeaderBytes {
			continue
		}
		if _, err := follow.DecodeMessage(rest[i+recordHeaderBytes:i+recordHeaderBytes+n], fr.path, fr.lim); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// replay is the state the records read so far hold.
type replay struct {
	st    follow.State
	bytes int64
	dead  int // entries cut off the front of st.Entries's array since it was last copied
}

// apply applies a record: a Promise replaces the state whole, an Append
// cuts the log at its durable point and extends it (change writes them).
// It fails, matching frames.ErrCorrupt or frames.ErrTooLarge, on a record
// that change would not write.
func (rp *replay) apply(m follow.Message, first bool, lim follow.Limits) error {
	fail := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)
	}
	st := &rp.st
	switch m := m.(type) {
	case *follow.Promise:
		if !first && (m.Epoch < st.Promised || m.LogEpoch < st.LogEpoch) {
			return fail(frames.ErrCorrupt, "whole state of epoch %d (log epoch %d) after epoch %d (log epoch %d)", m.Epoch, m.LogEpoch, st.Promised, st.LogEpoch)
		}
		bytes := sizeOf(m.Entries)
		if bytes > lim.MaxTailBytes {
			return fail(frames.ErrTooLarge, "%d bytes of entries, past the bound of %d", bytes, lim.MaxTailBytes)
		}
		*rp = replay{st: follow.State{Promised: m.Epoch, LogEpoch: m.LogEpoch, Base: m.Base, Entries: m.Entries}, bytes: bytes}
	case *follow.Append:
		switch {
		case first:
			return fail(frames.ErrCorrupt, "the first record is a change, not a whole state")
		case m.Reset:
			return fail(frames.ErrCorrupt, "a change marked reset")
		case m.Epoch < st.Promised:
			return fail(frames.ErrCorrupt, "change of epoch %d after epoch %d", m.Epoch, st.Promised)
		case m.Durable.Seq < st.Base.Seq:
			return fail(frames.ErrCorrupt, "base moves back from seq %d to %d", st.Base.Seq, m.Durable.Seq)
		}
		end := st.End()
		if m.Durable.Seq > end.Seq {
			rp.cut(len(st.Entries))
			st.Base = m.Durable
		} else {
			c, _ := chainAt(st.Base, st.Entries, m.Durable.Seq)
			if c != m.Durable.Chain {
				return fail(frames.ErrCorrupt, "base at seq %d with chain %s, the log holds %s", m.Durable.Seq, m.Durable.Chain, c)
			}
			rp.cut(int(m.Durable.Seq - st.Base.Seq))
			st.Base = m.Durable
		}
		if m.Prev != st.End() {
			return fail(frames.ErrCorrupt, "entries from seq %d, the log ends at %d", m.Prev.Seq, st.End().Seq)
		}
		add := sizeOf(m.Entries)
		if rp.bytes+add > lim.MaxTailBytes {
			return fail(frames.ErrTooLarge, "%d bytes of entries, past the bound of %d", rp.bytes+add, lim.MaxTailBytes)
		}
		st.Promised = m.Epoch
		st.Entries = append(st.Entries, m.Entries...)
		rp.bytes += add
	default:
		return fail(frames.ErrCorrupt, "a %T record", m)
	}
	return nil
}

// cut drops the first n entries, copying the rest once as many have gone
// as are left, so that replaying a long file holds the live entries and
// not every one it read.
func (rp *replay) cut(n int) {
	if n == 0 {
		return
	}
	rp.bytes -= sizeOf(rp.st.Entries[:n])
	rp.st.Entries = rp.st.Entries[n:]
	if rp.dead += n; rp.dead > len(rp.st.Entries) {
		rp.st.Entries, rp.dead = slices.Clone(rp.st.Entries), 0
	}
}

// result is the state read, its entries' bodies copied into one buffer so
// that the records they were read from are not kept.
func (rp *replay) result(end int64, torn error) readResult {
	st := rp.st
	var n int
	for i := range st.Entries {
		n += len(st.Entries[i].Body)
	}
	buf := make([]byte, 0, n)
	es := make([]follow.Entry, len(st.Entries))
	for i, e := range st.Entries {
		if len(e.Body) > 0 {
			buf = append(buf, e.Body...)
			e.Body = buf[len(buf)-len(e.Body) : len(buf) : len(buf)]
		} else {
			e.Body = nil
		}
		es[i] = e
	}
	if len(es) == 0 {
		es = nil
	}
	st.Entries = es
	return readResult{st: st, bytes: rp.bytes, end: end, torn: torn}
}
