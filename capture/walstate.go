package capture

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/internal/captured"
)

// walState is the capture state of one attached database, shared by every
// connection to it (each has its own WAL handle, wal.go). It knows where
// the WAL stands: the current generation, and the WAL frame where the next
// transaction must start. That is enough to place each transaction without
// reading the WAL back, and to notice anything this process did not write.
//
// Concurrency: SQLite writes the WAL only under its WAL write lock (one
// writer per database, across connections and processes) and callbacks of
// one connection never run concurrently, but different connections call
// the VFS from different goroutines, so the fields below mu are guarded by
// mu. The sink is called outside mu, under emitMu, so it sees one call at a
// time and never a commit after broken.
type walState struct {
	dbPath string
	sink   captured.Sink
	// pages, when set, supplies the pages the local file lacks (pages.go),
	// of pageSize bytes, each read waiting at most pageTimeout. Set at
	// attach, never changed.
	pages       captured.PageSource
	pageSize    uint32
	pageTimeout time.Duration

	mu sync.Mutex
	// gen is the WAL generation on disk, as written through this VFS.
	gen walGen
	// emptied: the WAL is known to be empty or absent (first open, a
	// truncation to zero, a delete), so the next header may carry any salts.
	emptied bool
	// walSeen: a WAL handle was opened since attach (precondition checked).
	walSeen bool
	// next is the WAL frame where the next transaction must start: one past the
	// last commit frame (and past its padding), 1 in a new generation.
	next uint32
	// tailHdr is the last WAL frame header this process wrote at WAL frame
	// next, if tailSet: a transaction of ours rolled back
	// (foreignFramesLocked).
	tailHdr [walFrameHeaderSize]byte
	tailSet bool
	// txnSeq is bumped whenever a transaction begins or a generation
	// starts; a handle's open transaction is current only if it began at
	// the current txnSeq.
	txnSeq uint64
	// last is the handle of the last commit (it may still rewrite that
	// commit's WAL frame headers); padFrom is the same handle if it pads
	// commits, and pad what its padding copies look like.
	last, padFrom *walFile
	pad           padFrame
	pool          *captured.Pool
	brokenErr     error
	detached      bool
	readBacks     int // WAL frames read back from the file (the cache could not supply them)
	padFrames     int // padding copies of commit frames skipped
	rewinds       int // transactions that rolled back to a savepoint over spilled WAL frames

	emitMu  sync.Mutex
	sinkOff bool        // under emitMu: detached, the sink is gone
	halted  atomic.Bool // broken or detached: no more commits to the sink
}

// walGen is one WAL generation: everything between two WAL headers.
type walGen struct {
	valid    bool // a header written through this VFS, not since emptied
	pageSize uint32
	// ckptSeq is recorded but not checked: wal.c keeps the counter per
	// connection (Wal.nCkpt), so generations written by different
	// connections do not number consecutively.
	ckptSeq      uint32
	salt1, salt2 uint32
	bigEndian    bool   // checksums read big-endian (magic's low bit)
	commits      uint32 // commits in this generation
}

// setNextLocked moves the WAL frame where the next transaction starts.
func (st *walState) setNextLocked(next uint32) {
	if next != st.next {
		st.tailSet = false
	}
	st.next = next
}

// poolBytes bounds the page buffers a database keeps for reuse. A stream of
// small commits needs a handful (each returns to the pool when the sink
// releases it); the bound only limits what a large transaction leaves
// behind.
const poolBytes = 4 << 20

func newWALState(dbPath string, opts Options) *walState {
	return &walState{dbPath: dbPath, sink: opts.Sink, pages: opts.Pages, pageSize: opts.PageSize, pageTimeout: opts.PageTimeout, next: 1}
}

// openWAL checks a newly opened WAL handle against what the state knows.
// The first WAL open after attach enforces the precondition: an empty WAL.
// Later opens (another connection, or again after all closed) must find
// the WAL as this process left it. A failure breaks replication and fails
// the open.
func (st *walState) openWAL(w *walFile) error {
	st.mu.Lock()
	err := st.openWALLocked(w)
	notify := err != nil && st.breakLocked(err)
	st.mu.Unlock()
	if notify {
		st.notifyBroken(err)
	}
	return err
}

func (st *walState) openWALLocked(w *walFile) error {
	fail := func(kind error, msg string, cause error) error {
		return &captureError{Path: w.path, Kind: kind, Msg: msg, Err: cause}
	}
	size, err := w.File.Size()
	if err != nil {
		return fail(errNotPrepared, "size of the WAL", err)
	}
	if !st.walSeen {
		st.walSeen = true
		if size > 0 {
			return fail(errNotPrepared, fmt.Sprintf("WAL holds %d bytes at the first open: the capture must see the WAL from its first write", size), nil)
		}
		st.emptied = true
		return nil
	}
	if !st.gen.valid {
		if size >= walHeaderSize {
			return fail(errGeneration, fmt.Sprintf("WAL holds %d bytes, but this process left it empty: another writer restarted it", size), nil)
		}
		st.walEmptiedLocked()
		return nil
	}
	if end := walFrameOffset(st.next, st.gen.pageSize); size < end {
		return fail(errFrameGap, fmt.Sprintf("WAL is %d bytes, but its committed WAL frames end at %d: it was truncated or replaced by another writer", size, end), nil)
	}
	var b [walHeaderSize]byte
	if _, err := w.File.ReadAt(b[:], 0); err != nil {
		return fail(errGeneration, "reading the WAL header", err)
	}
	h, err := parseWALHeader(b[:])
	if err != nil || h.salt1 != st.gen.salt1 || h.salt2 != st.gen.salt2 || h.pageSize != st.gen.pageSize {
		return fail(errGeneration, fmt.Sprintf("WAL header is not the one this process wrote (salts %08x/%08x)", st.gen.salt1, st.gen.salt2), err)
	}
	return nil
}

// checkHeaderLocked decides whether a WAL header about to be written starts
// a generation that follows the one this process saw.
//
// How SQLite sets the salts (wal.c): a writer that restarts the WAL after a
// complete checkpoint (walRestartLog → walRestartHdr) writes salt-1 + 1 and
// a random salt-2; it has just incremented its per-connection checkpoint
// counter, so it never takes the other branch of sqlite3WalFrames, "if(
// pWal->nCkpt==0 ) sqlite3_randomness(8, pWal->hdr.aSalt)", which draws both
// salts at random. A connection that never restarted the log itself does
// take it, whenever it writes a header because mxFrame is 0 without having
// restarted: after a TRUNCATE checkpoint by another connection, when the
// WAL was deleted (last connection closed) or absent, and when the first
// transaction of a generation was rolled back (its header stays, nothing is
// committed under it, and the next writer writes a header again).
//
// So: after a generation with commits, the next header must carry salt-1 +
// 1, unless the WAL was emptied through this VFS meanwhile (truncated to
// zero or deleted); a header replacing one with no commit under it may
// carry anything.
//
// The salts alone miss one case: another writer appends commits after ours
// and a checkpoint (anyone's) copies them into the database; the next
// restart is then legitimately salt-1 + 1. foreignFramesLocked catches it
// before any restart, truncation or deletion of the WAL.
func (st *walState) checkHeaderLocked(path string, h walHeader) error {
	var msg string
	switch {
	case st.pool != nil && h.pageSize != uint32(st.pool.Size()):
		msg = fmt.Sprintf("page size %d after %d: the page size cannot change in WAL mode", h.pageSize, st.pool.Size())
	case !st.gen.valid && !st.emptied:
		msg = "WAL header written over a WAL this process did not see emptied"
	case st.gen.valid && st.gen.commits > 0 && h.salt1 != st.gen.salt1+1:
		msg = fmt.Sprintf("salt-1 %08x follows generation %08x/%08x (expected %08x): the WAL was restarted by a writer this process did not see",
			h.salt1, st.gen.salt1, st.gen.salt2, st.gen.salt1+1)
	default:
		return nil
	}
	return &captureError{Path: path, Kind: errGeneration, Msg: msg}
}

// startGenerationLocked records a WAL header just written.
func (st *walState) startGenerationLocked(h walHeader) {
	if st.pool == nil {
		st.pool = captured.NewPool(int(h.pageSize), max(16, poolBytes/int(h.pageSize)))
	}
	st.gen = walGen{valid: true, pageSize: h.pageSize, ckptSeq: h.ckptSeq, salt1: h.salt1, salt2: h.salt2, bigEndian: h.bigEndian}
	st.emptied = false
	st.setNextLocked(1)
	st.txnSeq++
	st.last, st.padFrom = nil, nil
}

// walEmptiedLocked records that the WAL was truncated to nothing or deleted.
func (st *walState) walEmptiedLocked() {
	st.gen = walGen{}
	st.emptied = true
	st.setNextLocked(1)
	st.tailSet = false
	st.txnSeq++
	st.last, st.padFrom = nil, nil
}

// foreignFramesLocked looks, before the current generation's WAL frames are
// discarded (a restart writes a new header, a truncation or deletion
// empties the WAL), for WAL frames this process did not write. Another writer
// appends at SQLite's mxFrame + 1, which is st.next, so only that WAL frame
// needs a look. It is foreign when it carries this generation's salts (an
// older generation's WAL frame has other salts), its checksum chains from the
// WAL frame before (so it was written after our last commit, not left over
// from a transaction of ours rolled back before it), and it is not the
// header this process last wrote there (one of ours rolled back after it).
// The file must also still hold the committed WAL frames. One size, two small
// reads and a page read per WAL restart; nothing per commit.
//
// What stays undetectable: a writer outside this process that commits and
// then empties or restarts the WAL itself (a TRUNCATE checkpoint, or the
// last connection closing) while no connection of ours writes in between,
// and whose next header happens to be legal; its commits are then in the
// database but not in the bucket. Restore and verify catch that divergence
// with the database checksum, not the capture.
func (st *walState) foreignFramesLocked(path string, size int64, read func([]byte, int64) (int, error)) error {
	if !st.gen.valid {
		return nil
	}
	ps := st.gen.pageSize
	k := st.next
	off := walFrameOffset(k, ps)
	if size < off {
		return &captureError{Path: path, Kind: errFrameGap,
			Msg: fmt.Sprintf("WAL is %d bytes, but its committed WAL frames end at %d: truncated by another writer", size, off)}
	}
	if size < off+walFrameHeaderSize+int64(ps) {
		return nil
	}
	fail := func(err error) error {
		return &captureError{Path: path, WALFrame: k, Kind: errFrameGap, Msg: "reading the WAL frame after the last commit", Err: err}
	}
	frame := make([]byte, walFrameHeaderSize+int(ps)) // rare: once per restart
	if _, err := read(frame, off); err != nil {
		return fail(err)
	}
	hdr := frame[:walFrameHeaderSize]
	if be32(hdr[8:12]) != st.gen.salt1 || be32(hdr[12:16]) != st.gen.salt2 {
		return nil
	}
	if st.tailSet && bytes.Equal(hdr, st.tailHdr[:]) {
		return nil
	}
	// The chain's seed: the previous WAL frame's checksum, or for WAL
	// frame 1 the WAL header's (wal.c walEncodeFrame, sqlite3WalFrames).
	var seed [8]byte
	seedAt := int64(24)
	if k > 1 {
		seedAt = walFrameOffset(k-1, ps) + 16
	}
	if _, err := read(seed[:], seedAt); err != nil {
		return fail(err)
	}
	s1, s2 := walChecksum(hdr[:8], st.gen.bigEndian, be32(seed[0:4]), be32(seed[4:8]))
	s1, s2 = walChecksum(frame[walFrameHeaderSize:], st.gen.bigEndian, s1, s2)
	if s1 != be32(hdr[16:20]) || s2 != be32(hdr[20:24]) {
		return nil
	}
	return &captureError{Path: path, WALFrame: k, Kind: errFrameGap,
		Msg: fmt.Sprintf("a WAL frame written after the last commit (WAL frame %d) that this process did not write: another writer is writing the WAL", k-1)}
}

// truncateWALLocked records a truncation of the WAL to size bytes (done).
// SQLite truncates it to zero after a TRUNCATE checkpoint or on close with
// journal_size_limit, and to journal_size_limit (never below the WAL frames of
// the commit just made) after the first commit of a generation (wal.c
// walLimitSize). Cutting committed WAL frames is something else.
func (st *walState) truncateWALLocked(path string, size int64) error {
	if size < walHeaderSize {
		st.walEmptiedLocked()
		return nil
	}
	if st.gen.valid {
		if end := walFrameOffset(st.next, st.gen.pageSize); size < end {
			return &captureError{Path: path, Kind: errFrameGap,
				Msg: fmt.Sprintf("WAL truncated to %d bytes, cutting committed WAL frames (they end at %d)", size, end)}
		}
	}
	return nil
}

// refuseLocked reports why a WAL write that would start or extend a
// transaction must not happen, or nil. werr is the sink's writable().
func (st *walState) refuseLocked(path string, werr error) error {
	switch {
	case st.brokenErr != nil:
		return &captureError{Path: path, Kind: errRefused, Msg: "replication is broken", Err: Refuse(ReasonBroken, st.brokenErr)}
	case st.detached:
		return &captureError{Path: path, Kind: errRefused, Msg: "database detached from the capture", Err: Refuse(ReasonDetached, errDetached)}
	case werr != nil:
		return &captureError{Path: path, Kind: errRefused, Err: werr}
	}
	return nil
}

// breakLocked makes the state broken (the first error sticks) and reports
// whether the sink must be told (notifyBroken, outside mu).
func (st *walState) breakLocked(err error) bool {
	if st.brokenErr != nil {
		return false
	}
	st.brokenErr = err
	notify := !st.halted.Load()
	st.halted.Store(true)
	return notify
}

// fail breaks the state and tells the sink. Not under mu.
func (st *walState) fail(err error) {
	st.mu.Lock()
	notify := st.breakLocked(err)
	st.mu.Unlock()
	if notify {
		st.notifyBroken(err)
	}
}

func (st *walState) notifyBroken(err error) {
	st.emitMu.Lock()
	defer st.emitMu.Unlock()
	if !st.sinkOff {
		st.sink.Broken(err)
	}
}

// emit hands a commit to the sink. It runs in the xWrite of the commit
// WAL frame, after the write, while SQLite still holds the WAL write lock, so
// commits reach the sink in WAL order. A commit staged before replication
// halted is dropped.
func (st *walState) emit(c *captured.Commit) {
	st.emitMu.Lock()
	defer st.emitMu.Unlock()
	if st.halted.Load() || st.sinkOff {
		c.Release()
		return
	}
	c.CommitTime = time.Now().UnixNano()
	st.sink.Commit(c)
}

// detach stops all sink calls; remaining handles get their WAL writes
// refused. Once it returns, no sink call is in progress or will start.
func (st *walState) detach() {
	st.mu.Lock()
	st.detached = true
	st.halted.Store(true)
	st.mu.Unlock()
	st.emitMu.Lock()
	st.sinkOff = true
	st.emitMu.Unlock()
}

// padFrame is what a padding copy of the last commit frame looks like.
//
// With psow=0 (no powersafe overwrite) and a synced commit, wal.c
// sqlite3WalFrames repeats the commit frame, commit flag and all, until the
// next sector boundary, and syncs at that boundary in the middle of a
// WAL frame (walWriteToLog splits the write, even inside a WAL frame header:
// testdata/wal-trace.txt, S5 and S7). The copies are valid commit frames of
// the same transaction; SQLite counts them into mxFrame, so the next
// transaction starts after them, but they carry nothing new and must not be
// emitted.
//
// The capture tells them from a real commit by when and what: a WAL frame
// written by the handle that just committed (and pads), before its
// connection's FCNTL_COMMIT_PHASETWO (mainFile.CommitPhaseTwo: padding is
// written in commit phase one, so a WAL frame after phase two belongs to a new
// transaction), at the WAL frame where the next transaction would start, a
// single WAL frame with the commit flag, whose page number, database size,
// salts and page equal the last commit frame's. Only the checksum (bytes
// 16..24) differs, as it chains.
//
// The phase-two boundary matters: a transaction whose only change was
// rolled back to a savepoint still commits, and SQLite then writes page 1,
// unchanged, as its commit frame (pager.c: "at least one page for the WAL
// commit flag"), which can equal the previous commit frame of the same
// connection byte for byte (seen in TestCaptureRandomWorkload). Should the
// WAL handle not find its connection's database handle, the window stays
// open until another connection commits, and such a commit would be taken
// for padding and dropped; that loses nothing, as it changes nothing.
type padFrame struct {
	hdr  [16]byte // page number, db size, salt-1, salt-2
	data []byte
}

// matches reports whether p, written at offset in within a WAL frame, agrees
// with the padding copy.
func (pf *padFrame) matches(p []byte, in int) bool {
	end := in + len(p)
	if in < 16 {
		hi := min(end, 16)
		if !bytes.Equal(p[:hi-in], pf.hdr[in:hi]) {
			return false
		}
	}
	if end > walFrameHeaderSize {
		ds := max(in, walFrameHeaderSize)
		if !bytes.Equal(p[ds-in:], pf.data[ds-walFrameHeaderSize:end-walFrameHeaderSize]) {
			return false
		}
	}
	return true
}
