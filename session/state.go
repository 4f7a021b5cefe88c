package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/framectl/framectl/frames"
)

// The local state file, framectl.state beside db.sqlite: its purpose and
// layout are under "Local state file" in the package documentation
// (doc.go); the offsets and sizes below are that layout.
//
// Why in place and not by rename: renaming a file over another makes ext4
// flush it at once (auto_da_alloc), and done per batch that stalled every
// fsync of a synchronous=FULL database behind a journal commit, costing 60%
// of its commit rate. A pwrite of a few bytes into an allocated block does
// not. Each record is far smaller than a sector and carries its own CRC, so a
// torn or stale record is detected and ignored.
//
// Why no fsync: after a process crash (SIGKILL, panic) the page cache keeps
// every write, so the file is exact, as is the database file beside it.
// After a power loss both may have lost recent writes in any order; the boot
// ID tells the next Open that this happened (or may have), and it then
// trusts only what checksums prove (session.go).
const (
	stateFile     = "framectl.state"
	databaseFile  = "db.sqlite"
	stateVersion  = 1
	stateSize     = 144
	offDurable    = 32
	offInflight   = 76
	offCaptured   = 120
	recordSize    = 44
	capturedSize  = 24
	legacyStateV0 = "state.json" // written by earlier versions: removed at Open
)

var stateMagic = [8]byte{'f', 'r', 'a', 'm', 'e', 'c', 't', 'l'}

// stateRecord is one durable or in-flight record: an object of the
// actor's history and the database after it.
type stateRecord struct {
	Epoch      frames.Epoch
	Seq        frames.Seq
	CommitTime int64
	Checksum   frames.Checksum
	Pages      uint32
	Object     frames.KeyKind // frames.KeyLog or frames.KeySnapshot
}

func (r stateRecord) valid() bool { return r.Epoch != 0 }

// key is the bucket key of the object the record describes.
func (r stateRecord) key(a frames.Actor) string {
	if r.Object == frames.KeySnapshot {
		return a.SnapshotKey(r.Epoch, r.Seq)
	}
	return a.LogKey(r.Epoch, r.Seq)
}

// Object codes in the file (not frames.KeyKind's values, which are not
// part of any format).
const (
	objectBatch    = 1
	objectSnapshot = 2
)

func (r stateRecord) position() position { return position{seq: r.Seq, commitTime: r.CommitTime} }

func (r stateRecord) encode(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(r.Epoch))
	binary.LittleEndian.PutUint64(b[8:], uint64(r.Seq))
	binary.LittleEndian.PutUint64(b[16:], uint64(r.CommitTime))
	binary.LittleEndian.PutUint64(b[24:], uint64(r.Checksum))
	binary.LittleEndian.PutUint32(b[32:], r.Pages)
	obj := uint32(objectBatch)
	if r.Object == frames.KeySnapshot {
		obj = objectSnapshot
	}
	binary.LittleEndian.PutUint32(b[36:], obj)
	binary.LittleEndian.PutUint32(b[40:], crc32.ChecksumIEEE(b[:40]))
}

// decodeRecord returns the record in b, or the zero record if b is zero or
// fails its CRC (torn, or never written).
func decodeRecord(b []byte) stateRecord {
	if binary.LittleEndian.Uint32(b[40:]) != crc32.ChecksumIEEE(b[:40]) {
		return stateRecord{}
	}
	r := stateRecord{
		Epoch:      frames.Epoch(binary.LittleEndian.Uint64(b[0:])),
		Seq:        frames.Seq(binary.LittleEndian.Uint64(b[8:])),
		CommitTime: int64(binary.LittleEndian.Uint64(b[16:])),
		Checksum:   frames.Checksum(binary.LittleEndian.Uint64(b[24:])),
		Pages:      binary.LittleEndian.Uint32(b[32:]),
	}
	switch binary.LittleEndian.Uint32(b[36:]) {
	case objectBatch:
		r.Object = frames.KeyLog
	case objectSnapshot:
		r.Object = frames.KeySnapshot
	default:
		return stateRecord{}
	}
	return r
}

// encodeCaptured writes the captured record: the epoch it counts in, then
// the sequence, which alone changes while a session runs (capturedWord).
func encodeCaptured(b []byte, epoch frames.Epoch, seq frames.Seq) {
	binary.LittleEndian.PutUint64(b[0:], uint64(epoch))
	binary.LittleEndian.PutUint64(b[8:], uint64(seq))
	clear(b[16:capturedSize])
}

// localState is what the state file says. Either record may be absent
// (zero).
type localState struct {
	PageSize uint32
	Boot     bootID
	Durable  stateRecord
	Inflight stateRecord // zero when no upload was under way
	// Captured is the last sequence captured in Durable.Epoch (0 unknown).
	Captured frames.Seq
}

// readState reads the state file of dir; the zero localState when there is
// none. A file that is not a state file is an error (the caller ignores it,
// trusting only checksums).
func readState(dir string) (localState, error) {
	st, _, err := readStateFile(dir)
	return st, err
}

func readStateFile(dir string) (st localState, found bool, err error) {
	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return localState{}, false, nil
	}
	if err != nil {
		return localState{}, false, fmt.Errorf("session: %w", err)
	}
	if len(b) != stateSize || [8]byte(b[:8]) != stateMagic {
		return localState{}, false, fmt.Errorf("session: %s: not a state file (%d bytes)", path, len(b))
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != stateVersion {
		return localState{}, false, fmt.Errorf("session: %s: unknown version %d", path, v)
	}
	st = localState{
		PageSize: binary.LittleEndian.Uint32(b[12:]),
		Boot:     bootID(b[16:32]),
		Durable:  decodeRecord(b[offDurable : offDurable+recordSize]),
		Inflight: decodeRecord(b[offInflight : offInflight+recordSize]),
	}
	c := b[offCaptured : offCaptured+capturedSize]
	if d := st.Durable; d.valid() && frames.Epoch(binary.LittleEndian.Uint64(c[0:])) == d.Epoch {
		if seq := frames.Seq(binary.LittleEndian.Uint64(c[8:])); seq >= d.Seq {
			st.Captured = seq // never behind what was uploaded: anything else is stale
		}
	}
	if d, i := st.Durable, st.Inflight; d.valid() && i.valid() && (i.Epoch < d.Epoch || (i.Epoch == d.Epoch && i.Seq <= d.Seq)) {
		st.Inflight = stateRecord{} // landed and recorded since
	}
	return st, true, nil
}

// recordSessionStart records, before it is uploaded, the snapshot a new
// session starts with (first) as in flight in dir's state file. When the
// local copy is a state the bucket holds (base: reused or restored), the
// file is rewritten with base as its durable record, so that nothing the
// previous file knew is lost with its in-flight slot; otherwise (kept
// commits, a new actor) only the in-flight slot changes, in a file created
// if there is none. Should the process stop before the session's own file
// replaces it, the next Open still knows what the local copy is. Not
// synced.
func recordSessionStart(dir string, pageSize uint32, base, first stateRecord) error {
	path := filepath.Join(dir, stateFile)
	_, found, err := readStateFile(dir)
	f, ferr := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if ferr != nil {
		return fmt.Errorf("session: %w", ferr)
	}
	defer f.Close()
	fail := func(err error) error { return fmt.Errorf("session: writing %s: %w", path, err) }
	if base.valid() || !found || err != nil {
		var b [stateSize]byte
		encodeHeader(b[:], pageSize)
		if base.valid() {
			base.encode(b[offDurable : offDurable+recordSize])
			encodeCaptured(b[offCaptured:offCaptured+capturedSize], base.Epoch, base.Seq)
		}
		first.encode(b[offInflight : offInflight+recordSize])
		if _, err := f.WriteAt(b[:], 0); err != nil {
			return fail(err)
		}
		if err := f.Truncate(stateSize); err != nil {
			return fail(err)
		}
		return nil
	}
	var b [recordSize]byte
	first.encode(b[:])
	if _, err := f.WriteAt(b[:], offInflight); err != nil {
		return fail(err)
	}
	return nil
}

func encodeHeader(b []byte, pageSize uint32) {
	copy(b[:8], stateMagic[:])
	binary.LittleEndian.PutUint32(b[8:], stateVersion)
	binary.LittleEndian.PutUint32(b[12:], pageSize)
	boot := currentBoot()
	copy(b[16:32], boot[:])
}

// stateWriter keeps the state file of a session open and rewrites its
// records in place. Its methods are called from one goroutine at a time
// each (recordCaptured under the replicator's mutex, the others from the
// uploader); they touch disjoint bytes. A failed write is reported once in
// the log: the file is a hint, and the database keeps replicating.
type stateWriter struct {
	f     *os.File // nil while idle (closeIdle): write opens it again
	path  string
	epoch frames.Epoch
	warn  func(error)

	// captured is the captured sequence's word, in a shared mapping of the
	// file where the system has one (mmap_unix.go): a store to it is the
	// write. Nil elsewhere: recordCaptured then pwrites it.
	captured *capturedWord
	record   [recordSize]byte // scratch for the uploader's writes
	seqBuf   [8]byte          // scratch for recordCaptured's pwrite
}

// createState writes a new state file for a session whose first snapshot,
// start, is in the bucket, and keeps it open. It is synced once, so that a
// session's start survives a power loss as well as the database file does.
func createState(dir string, epoch frames.Epoch, start stateRecord, pageSize uint32, warn func(error)) (*stateWriter, error) {
	path := filepath.Join(dir, stateFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	var b [stateSize]byte
	encodeHeader(b[:], pageSize)
	start.encode(b[offDurable : offDurable+recordSize])
	encodeCaptured(b[offCaptured:offCaptured+capturedSize], epoch, start.Seq)
	if _, err := f.WriteAt(b[:], 0); err == nil {
		err = f.Truncate(stateSize)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("session: writing %s: %w", path, err)
	}
	os.Remove(filepath.Join(dir, legacyStateV0))
	w := &stateWriter{f: f, path: path, epoch: epoch, warn: warn}
	w.captured, _ = mapCaptured(f) // no mapping: pwrite instead
	return w, nil
}

func (w *stateWriter) write(b []byte, off int64) {
	var err error
	if w.f == nil {
		w.f, err = os.OpenFile(w.path, os.O_RDWR, 0)
	}
	if err == nil {
		_, err = w.f.WriteAt(b, off)
	}
	if err != nil && w.warn != nil {
		w.warn(err)
		w.warn = nil
	}
}

// closeIdle closes the file while the database is idle, on the uploader
// (the only caller of write once the captured word is mapped): a host
// holds thousands of idle databases, and a descriptor each counts against
// the process's limit on open files. The mapping stays; the next record
// opens the file again. Without a mapping recordCaptured writes through
// the file from the commit path, so it stays open.
func (w *stateWriter) closeIdle() {
	if w.captured == nil || w.f == nil {
		return
	}
	if err := w.f.Close(); err != nil && w.warn != nil {
		w.warn(err)
		w.warn = nil
	}
	w.f = nil
}

// recordCaptured records the last sequence captured. It runs for every
// commit, inside the commit's WAL write: through the shared mapping it is
// one atomic 8-byte store into the page cache, not a syscall, and a
// process crash keeps it like any written page. An aligned 8-byte store
// cannot tear.
func (w *stateWriter) recordCaptured(seq frames.Seq) {
	if w.captured != nil {
		w.captured.store(seq)
		return
	}
	binary.LittleEndian.PutUint64(w.seqBuf[:], uint64(seq))
	w.write(w.seqBuf[:], offCaptured+8)
}

// recordInflight records the batch about to be uploaded, before its PUT:
// the next Open then knows which key to look for should the listing not
// show it.
func (w *stateWriter) recordInflight(r stateRecord) {
	r.encode(w.record[:])
	w.write(w.record[:], offInflight)
}

// recordDurable records a batch the bucket acknowledged.
func (w *stateWriter) recordDurable(r stateRecord) {
	r.encode(w.record[:])
	w.write(w.record[:], offDurable)
}

func (w *stateWriter) close() error {
	if w.captured != nil {
		w.captured.unmap()
	}
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}
