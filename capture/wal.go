package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/captured"
)

// walFile is one connection's handle on an attached database's WAL. It
// keeps the WAL frames of the transaction its connection is writing, and when
// the commit frame is complete it turns them into one captured.Commit.
//
// What SQLite writes (wal.c sqlite3WalFrames; observed in
// testdata/wal-trace.txt), all under its WAL write lock:
//   - a 32-byte WAL header at offset 0 when it starts a generation;
//   - per WAL frame, a 24-byte header, then the page (walWriteOneFrame); a
//     transaction's WAL frames are consecutive, from one past the last commit;
//   - spilled pages of an open transaction (cache full) as WAL frames without
//     the commit flag, in earlier calls;
//   - in-place overwrites: a page already spilled in this transaction is
//     rewritten in its WAL frame, page only; its checksum is then deferred, so
//     later WAL frames carry zero salts and checksums (iReCksum) ...
//   - ... until, after the commit frame, walRewriteChecksums rewrites the
//     headers from the first overwritten WAL frame on, commit frame included;
//   - with psow=0 and a synced commit, padding copies of the commit frame
//     (padFrame in walstate.go);
//   - nothing at all on rollback: the WAL frames stay in the file, and the
//     next transaction, of any connection, writes over them;
//   - on ROLLBACK TO a savepoint whose changes spilled, nothing either:
//     sqlite3WalSavepointUndo moves the write position (mxFrame) back to
//     where the savepoint began, and the transaction's next WAL frame header
//     lands inside the transaction, over WAL frames already written (opRewind).
//
// Each write is one of the walOp cases below. SQLite never writes across
// WAL frames, nor part of a WAL header; such a write breaks replication.
//
// A transaction's pages stay in the slots until its commit frame (its
// captured.Commit carries them all anyway); the WAL frame where it starts comes
// from walState, so nothing is read back from the file.
//
// SQLite calls a handle from one goroutine at a time; the fields it shares
// with the database's other handles are in walState, under its mu, which
// every write holds.
type walFile struct {
	passFile
	st   *walState
	path string
	// pads: SQLite pads this connection's synced commits (psow=0).
	pads bool
	db   *mainFile // the same connection's database handle, if found

	// The transaction being written: WAL frames start..start+n-1 in slots.
	open   bool
	txnSeq uint64 // walState.txnSeq when it began
	start  uint32
	n      int
	// overwrote: the first WAL frame it overwrote in place, 0 if none; its
	// headers from there on get rewritten after the commit frame (wal.c
	// iReCksum).
	overwrote uint32
	padOK     bool // the WAL frame being written still matches the padding copy

	// afterCommit: this handle's next writes may complete its last commit
	// (header rewrites, padding). Those go through even when the sink is not
	// writable, and writable() may block, so it is asked only once a write
	// is known not to be one of them.
	afterCommit bool
	// The last commit of this handle, while walState.last == this handle.
	lastFirst, lastCommit uint32

	slots []walSlot // reused across transactions, buffers included
	keys  []uint64  // scratch for sorting pages: page<<32 | slot
}

// walSlot caches one frame of the open transaction.
type walSlot struct {
	hdr   [walFrameHeaderSize]byte
	hdrN  int    // header bytes written, contiguous from 0
	dataN int    // page bytes written, contiguous from 0
	data  []byte // page buffer from the pool (nil until needed)
}

// Slots kept between transactions. A larger transaction's extra buffers go
// back to the pool when the next one begins.
const keepSlots = 64

type walOp uint8

const (
	opHeader    walOp = iota + 1 // WAL header at offset 0: a new generation
	opBegin                      // header of the WAL frame where the next transaction starts
	opAppend                     // header of the next WAL frame of the open transaction
	opOverwrite                  // any other bytes of a WAL frame of the open transaction
	opRewrite                    // header of a frame of the last commit, rewritten with final checksums
	opRewind                     // header of a frame inside the open transaction: it rolled back to a savepoint
)

// walWrite is a classified write.
type walWrite struct {
	op    walOp
	idx   uint32 // WAL frame, 1-based (0 for opHeader)
	in    int    // offset within the WAL frame
	hdr   walHeader
	padOK bool // the WAL frame so far is a padding copy of the last commit frame
}

// completes: the write completes the last commit instead of starting or
// extending a transaction. It is never refused: the commit is already with
// the sink, and failing it now would make SQLite report a commit as failed
// after the sink took it.
func (ww walWrite) completes() bool { return ww.op == opRewrite || ww.padOK }

func (w *walFile) WriteAt(p []byte, off int64) (int, error) {
	st := w.st
	// Ask the sink before taking the lock: writable may block (backpressure).
	var werr error
	asked := !w.afterCommit
	if asked {
		werr = st.sink.Writable()
	}
	st.mu.Lock()
	ww, err := w.classify(p, off)
	if err == nil && !ww.completes() && !asked {
		// Not a completion after all: ask now, outside the lock.
		w.afterCommit = false
		st.mu.Unlock()
		werr = st.sink.Writable()
		st.mu.Lock()
		ww, err = w.classify(p, off)
	}
	if err == nil && !ww.completes() {
		if rerr := st.refuseLocked(w.path, werr); rerr != nil {
			st.mu.Unlock()
			return 0, ioError(rerr)
		}
	}
	if err != nil {
		notify := st.breakLocked(err)
		st.mu.Unlock()
		if notify {
			st.notifyBroken(err)
		}
		return 0, ioError(err)
	}

	n, err := w.File.WriteAt(p, off)
	if err != nil {
		// SQLite fails the transaction; nothing of it may be emitted.
		w.open = false
		st.mu.Unlock()
		return n, err
	}
	c, err := w.apply(ww, p)
	var notify bool
	if err != nil {
		notify = st.breakLocked(err)
	}
	st.mu.Unlock()
	if err != nil {
		if notify {
			st.notifyBroken(err)
		}
		return n, ioError(err)
	}
	if c != nil {
		st.emit(c)
	}
	return n, nil
}

// classify decides what a write is, or why it cannot be accounted for,
// before it touches the file. It changes nothing.
func (w *walFile) classify(p []byte, off int64) (walWrite, error) {
	st := w.st
	gap := func(idx uint32, msg string) (walWrite, error) {
		return walWrite{}, &captureError{Path: w.path, WALFrame: idx, Kind: errFrameGap, Msg: msg}
	}
	if off < walHeaderSize {
		if off != 0 || len(p) != walHeaderSize {
			return walWrite{}, &captureError{Path: w.path, Kind: errMalformedWrite,
				Msg: fmt.Sprintf("%d bytes at offset %d, inside the WAL header", len(p), off)}
		}
		h, err := parseWALHeader(p)
		if err != nil {
			return walWrite{}, &captureError{Path: w.path, Kind: errMalformedWrite, Err: err}
		}
		if err := st.checkHeaderLocked(w.path, h); err != nil {
			return walWrite{}, err
		}
		if st.gen.valid {
			size, err := w.File.Size()
			if err != nil {
				return walWrite{}, &captureError{Path: w.path, Kind: errFrameGap, Msg: "size of the WAL", Err: err}
			}
			if err := st.foreignFramesLocked(w.path, size, w.File.ReadAt); err != nil {
				return walWrite{}, err
			}
		}
		return walWrite{op: opHeader, hdr: h}, nil
	}
	if !st.gen.valid {
		return walWrite{}, &captureError{Path: w.path, Kind: errGeneration,
			Msg: fmt.Sprintf("%d bytes at offset %d with no WAL header written through this process: another writer started this generation", len(p), off)}
	}
	fsz := walFrameHeaderSize + int64(st.gen.pageSize)
	rel := off - walHeaderSize
	in := rel % fsz
	if rel/fsz >= 1<<32-1 || in+int64(len(p)) > fsz {
		return walWrite{}, &captureError{Path: w.path, Kind: errMalformedWrite,
			Msg: fmt.Sprintf("%d bytes at offset %d span WAL frames", len(p), off)}
	}
	ww := walWrite{idx: uint32(rel/fsz) + 1, in: int(in)}
	current := w.open && w.txnSeq == st.txnSeq
	switch {
	case ww.idx < st.next:
		// Only the header rewrites that finish the last commit
		// (walRewriteChecksums) may touch committed WAL frames.
		if st.last != w || w.open || w.start != w.lastFirst || ww.idx < w.lastFirst || ww.idx > w.lastCommit || ww.in+len(p) > walFrameHeaderSize {
			return gap(ww.idx, fmt.Sprintf("write into a committed WAL frame (committed WAL frames end at %d): the WAL was rewritten by a writer this process did not see", st.next-1))
		}
		// It must say what the commit said: same page, same db size, and
		// the generation's salts (they are final now).
		want := w.slots[ww.idx-w.start].hdr
		binary.BigEndian.PutUint32(want[8:12], st.gen.salt1)
		binary.BigEndian.PutUint32(want[12:16], st.gen.salt2)
		if hi := min(ww.in+len(p), 16); ww.in < hi && !bytes.Equal(p[:hi-ww.in], want[ww.in:hi]) {
			return gap(ww.idx, "rewritten WAL frame header differs from the committed one")
		}
		ww.op = opRewrite
		return ww, nil
	case ww.idx == st.next && ww.in == 0:
		ww.op = opBegin
	case current && ww.idx < w.start+uint32(w.n) && ww.in == 0:
		// SQLite writes a WAL frame header only for a new frame at mxFrame+1
		// (walWriteOneFrame; in-place overwrites write the page alone), so
		// a header inside the transaction means mxFrame moved back: ROLLBACK
		// TO a savepoint (sqlite3WalSavepointUndo). Frames from idx on are
		// rolled back. (A rewind to the transaction's first WAL frame is
		// opBegin above: the transaction starts afresh.)
		ww.op = opRewind
	case current && ww.idx < w.start+uint32(w.n):
		ww.op = opOverwrite
	case current && ww.idx == w.start+uint32(w.n) && ww.in == 0:
		ww.op = opAppend
	default:
		return gap(ww.idx, fmt.Sprintf("the next transaction must start at WAL frame %d: another writer appended WAL frames this process did not see", st.next))
	}
	// A header's salts are the generation's, or zero while SQLite defers
	// checksums after an in-place overwrite (they are rewritten after the
	// commit frame). Split headers are checked at the commit instead.
	if ww.in <= 8 && ww.in+len(p) >= 16 {
		s := p[8-ww.in : 16-ww.in]
		if s1, s2 := be32(s[0:4]), be32(s[4:8]); (s1 != 0 || s2 != 0) && (s1 != st.gen.salt1 || s2 != st.gen.salt2) {
			return walWrite{}, st.saltError(w.path, ww.idx, s1, s2)
		}
	}
	if st.padFrom == w {
		switch ww.op {
		case opBegin:
			ww.padOK = st.pad.matches(p, ww.in)
		case opOverwrite:
			ww.padOK = w.padOK && w.n == 1 && st.pad.matches(p, ww.in)
		}
	}
	return ww, nil
}

func (st *walState) saltError(path string, idx, s1, s2 uint32) error {
	return &captureError{Path: path, WALFrame: idx, Kind: errGeneration,
		Msg: fmt.Sprintf("WAL frame salts %08x/%08x, but the generation this process started is %08x/%08x: written under a WAL header it did not see",
			s1, s2, st.gen.salt1, st.gen.salt2)}
}

// apply records a classified write that reached the file, and returns the
// commit it completes, if any.
func (w *walFile) apply(ww walWrite, p []byte) (*captured.Commit, error) {
	st := w.st
	switch ww.op {
	case opHeader:
		st.startGenerationLocked(ww.hdr)
		w.open = false
		return nil, nil
	case opRewrite:
		w.slots[ww.idx-w.start].write(p, ww.in, st.pool)
		return nil, nil
	case opBegin:
		w.begin(ww.idx)
		w.addSlot()
	case opAppend:
		w.addSlot()
	case opRewind:
		w.n = int(ww.idx - w.start)
		st.rewinds++
		if w.overwrote >= ww.idx {
			// sqlite3WalSavepointUndo: "if( pWal->iReCksum>pWal->hdr.mxFrame )
			// pWal->iReCksum = 0", the overwrite was rolled back with its
			// WAL frame.
			w.overwrote = 0
		}
		w.addSlot()
	case opOverwrite:
		if s := &w.slots[ww.idx-w.start]; ww.in >= walFrameHeaderSize && s.dataN == int(st.gen.pageSize) && (w.overwrote == 0 || ww.idx < w.overwrote) {
			w.overwrote = ww.idx
		}
	}
	i := int(ww.idx - w.start)
	s := &w.slots[i]
	s.write(p, ww.in, st.pool)
	w.padOK = ww.padOK
	if ww.idx == st.next && ww.in < walFrameHeaderSize {
		st.tailHdr, st.tailSet = s.hdr, true
	}
	if !s.complete(st.gen.pageSize) || be32(s.hdr[4:8]) == 0 {
		return nil, nil
	}
	// The commit frame is complete.
	if i != w.n-1 {
		return nil, &captureError{Path: w.path, WALFrame: ww.idx, Kind: errMalformedWrite,
			Msg: fmt.Sprintf("commit frame before the transaction's last WAL frame %d", w.start+uint32(w.n)-1)}
	}
	if ww.padOK && w.n == 1 {
		st.padFrames++
		st.setNextLocked(ww.idx + 1)
		w.open = false
		return nil, nil
	}
	return w.commit()
}

// begin starts a transaction at WAL frame idx. Slots keep their buffers for
// reuse; those past keepSlots go back to the pool.
func (w *walFile) begin(idx uint32) {
	st := w.st
	st.txnSeq++
	w.txnSeq = st.txnSeq
	w.open, w.start, w.overwrote, w.padOK = true, idx, 0, false
	if len(w.slots) > keepSlots {
		for i := keepSlots; i < len(w.slots); i++ {
			st.pool.Put(w.slots[i].data)
		}
		w.slots = slices.Clone(w.slots[:keepSlots])
	}
	w.n = 0
}

func (w *walFile) addSlot() {
	if w.n == len(w.slots) {
		w.slots = append(w.slots, walSlot{})
	}
	s := &w.slots[w.n]
	s.hdrN, s.dataN = 0, 0
	w.n++
}

// write records p, written at offset in within the WAL frame.
func (s *walSlot) write(p []byte, in int, pool *captured.Pool) {
	if in < walFrameHeaderSize {
		k := copy(s.hdr[in:], p)
		if in <= s.hdrN {
			s.hdrN = max(s.hdrN, in+k)
		}
		p, in = p[k:], in+k
	}
	if len(p) == 0 {
		return
	}
	if s.data == nil {
		s.data = pool.Get()
	}
	ds := in - walFrameHeaderSize
	copy(s.data[ds:], p)
	if ds <= s.dataN {
		s.dataN = max(s.dataN, ds+len(p))
	}
}

func (s *walSlot) complete(pageSize uint32) bool {
	return s.hdrN == walFrameHeaderSize && s.dataN == int(pageSize)
}

// commit turns the open transaction, whose last WAL frame is the complete
// commit frame, into a captured.Commit: the newest WAL frame of each page,
// ascending, none past the database size. Page buffers move from the slots
// into the captured.Commit; the only copy of a page is the one from SQLite's
// write into its slot.
func (w *walFile) commit() (*captured.Commit, error) {
	st := w.st
	pageSize := st.gen.pageSize
	commitIdx := w.start + uint32(w.n) - 1
	last := &w.slots[w.n-1]
	dbSize := be32(last.hdr[4:8])

	keys := w.keys[:0]
	for i := range w.n {
		s := &w.slots[i]
		idx := w.start + uint32(i)
		if !s.complete(pageSize) {
			// Never seen with SQLite's writes; the file has the WAL frame.
			if err := w.readBack(s, idx); err != nil {
				return nil, err
			}
		}
		if s1, s2 := be32(s.hdr[8:12]), be32(s.hdr[12:16]); (s1 != 0 || s2 != 0) && (s1 != st.gen.salt1 || s2 != st.gen.salt2) {
			return nil, st.saltError(w.path, idx, s1, s2)
		}
		pg := be32(s.hdr[0:4])
		if pg == 0 {
			return nil, &captureError{Path: w.path, WALFrame: idx, Kind: errMalformedWrite, Msg: "page number 0"}
		}
		keys = append(keys, uint64(pg)<<32|uint64(i))
	}
	if len(keys) > 1 {
		slices.Sort(keys)
	}

	if w.pads {
		// Keep the commit frame for telling padding copies (padFrame).
		if len(st.pad.data) != int(pageSize) {
			st.pad.data = make([]byte, pageSize)
		}
		copy(st.pad.hdr[:8], last.hdr[:8])
		binary.BigEndian.PutUint32(st.pad.hdr[8:12], st.gen.salt1)
		binary.BigEndian.PutUint32(st.pad.hdr[12:16], st.gen.salt2)
		copy(st.pad.data, last.data)
		st.padFrom = w
	} else {
		st.padFrom = nil
	}

	c := st.pool.NewCommit()
	c.PageSize, c.DatabasePages = pageSize, dbSize
	for j, key := range keys {
		pg := uint32(key >> 32)
		if pg > dbSize || (j+1 < len(keys) && uint32(keys[j+1]>>32) == pg) {
			continue // past the end after this commit, or an older version
		}
		s := &w.slots[uint32(key)]
		c.Pages = append(c.Pages, frames.Page{Number: pg, Data: s.data})
		s.data = nil
	}
	w.keys = keys

	st.setNextLocked(commitIdx + 1)
	st.gen.commits++
	st.last = w
	w.lastFirst, w.lastCommit = w.start, commitIdx
	w.afterCommit = w.pads || w.overwrote != 0
	w.open = false
	return c, nil
}

// readBack fills a slot from the file.
func (w *walFile) readBack(s *walSlot, idx uint32) error {
	st := w.st
	off := walFrameOffset(idx, st.gen.pageSize)
	if s.data == nil {
		s.data = st.pool.Get()
	}
	if _, err := w.File.ReadAt(s.hdr[:], off); err != nil {
		return &captureError{Path: w.path, WALFrame: idx, Kind: errMalformedWrite, Msg: "reading back a WAL frame header", Err: err}
	}
	if _, err := w.File.ReadAt(s.data, off+walFrameHeaderSize); err != nil {
		return &captureError{Path: w.path, WALFrame: idx, Kind: errMalformedWrite, Msg: "reading back a page", Err: err}
	}
	s.hdrN, s.dataN = walFrameHeaderSize, len(s.data)
	st.readBacks++
	return nil
}

// Truncate forwards, then tells the state (walState.truncateWALLocked).
// Emptying the WAL discards its WAL frames: first make sure none is foreign.
func (w *walFile) Truncate(size int64) error {
	st := w.st
	st.mu.Lock()
	var err error
	if size < walHeaderSize {
		if cur, serr := w.File.Size(); serr == nil {
			err = st.foreignFramesLocked(w.path, cur, w.File.ReadAt)
		}
	}
	if terr := w.File.Truncate(size); terr != nil {
		st.mu.Unlock()
		return terr
	}
	if terr := st.truncateWALLocked(w.path, size); err == nil {
		err = terr
	}
	notify := err != nil && st.breakLocked(err)
	st.mu.Unlock()
	if notify {
		st.notifyBroken(err)
	}
	return nil
}

// Close returns the handle's buffers to the pool.
func (w *walFile) Close() error {
	st := w.st
	if w.db != nil && w.db.wal == w {
		w.db.wal = nil
	}
	st.mu.Lock()
	if st.last == w {
		st.last = nil
	}
	if st.padFrom == w {
		st.padFrom = nil
	}
	if st.pool != nil {
		for i := range w.slots {
			st.pool.Put(w.slots[i].data)
		}
	}
	w.slots, w.n, w.open = nil, 0, false
	st.mu.Unlock()
	return w.File.Close()
}
