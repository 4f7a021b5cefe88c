package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/framectl/framectl/internal/captured"
	"github.com/framectl/framectl/internal/race"
	"github.com/ncruces/go-sqlite3/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the WAL capture with the exact write patterns of
// testdata/wal-trace.txt on an in-memory file, one case at a time.

// capMemFile is an in-memory vfs.File.
type capMemFile struct {
	mu   sync.Mutex
	b    []byte
	psow bool
}

func (f *capMemFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *capMemFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.b)) {
		f.b = append(f.b, make([]byte, end-int64(len(f.b)))...)
	}
	return copy(f.b[off:], p), nil
}

func (f *capMemFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if size < int64(len(f.b)) {
		f.b = f.b[:size]
	}
	return nil
}

func (f *capMemFile) Size() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.b)), nil
}

func (f *capMemFile) Close() error                     { return nil }
func (f *capMemFile) Sync(vfs.SyncFlag) error          { return nil }
func (f *capMemFile) Lock(vfs.LockLevel) error         { return nil }
func (f *capMemFile) Unlock(vfs.LockLevel) error       { return nil }
func (f *capMemFile) CheckReservedLock() (bool, error) { return false, nil }
func (f *capMemFile) SectorSize() int                  { return 512 }
func (f *capMemFile) DeviceCharacteristics() vfs.DeviceCharacteristic {
	if f.psow {
		return vfs.IOCAP_POWERSAFE_OVERWRITE
	}
	return 0
}

// capListSink keeps what it is handed.
type capListSink struct {
	commits []capGot
	broke   []error
	refuse  error
}

type capGot struct {
	dbPages uint32
	pages   map[uint32]byte // page -> first byte
	order   []uint32
}

func (s *capListSink) Writable() error  { return s.refuse }
func (s *capListSink) PhaseTwo() error  { return nil }
func (s *capListSink) Broken(err error) { s.broke = append(s.broke, err) }
func (s *capListSink) Commit(c *captured.Commit) {
	g := capGot{dbPages: c.DatabasePages, pages: map[uint32]byte{}}
	for _, p := range c.Pages {
		g.pages[p.Number] = p.Data[0]
		g.order = append(g.order, p.Number)
	}
	s.commits = append(s.commits, g)
	c.Release()
}

// capWAL writes like SQLite: one state, handles sharing it.
type capWAL struct {
	t     *testing.T
	st    *walState
	file  *capMemFile
	ps    uint32
	salt1 uint32
	salt2 uint32
}

const capPS = 512

func newCapWAL(t *testing.T, s captured.Sink) *capWAL {
	st := newWALState("/cap/db", Options{Sink: s})
	return &capWAL{t: t, st: st, file: &capMemFile{psow: true}, ps: capPS, salt1: 0x1000, salt2: 0xabc}
}

// handle opens a WAL handle (pads: psow=0).
func (cw *capWAL) handle(pads bool) *walFile {
	w := &walFile{passFile: passFile{cw.file}, st: cw.st, path: "/cap/db-wal", pads: pads}
	require.NoError(cw.t, cw.st.openWAL(w))
	return w
}

func (cw *capWAL) header(w *walFile, salt1, salt2 uint32) error {
	b := make([]byte, walHeaderSize)
	binary.BigEndian.PutUint32(b[0:], walMagic)
	binary.BigEndian.PutUint32(b[4:], walVersion)
	binary.BigEndian.PutUint32(b[8:], cw.ps)
	binary.BigEndian.PutUint32(b[16:], salt1)
	binary.BigEndian.PutUint32(b[20:], salt2)
	s1, s2 := walChecksum(b[:24], false, 0, 0)
	binary.BigEndian.PutUint32(b[24:], s1)
	binary.BigEndian.PutUint32(b[28:], s2)
	cw.salt1, cw.salt2 = salt1, salt2
	_, err := w.WriteAt(b, 0)
	return err
}

func (cw *capWAL) frameHeader(pgno, dbSize uint32, zeroSalts bool) []byte {
	h := make([]byte, walFrameHeaderSize)
	binary.BigEndian.PutUint32(h[0:], pgno)
	binary.BigEndian.PutUint32(h[4:], dbSize)
	if !zeroSalts {
		binary.BigEndian.PutUint32(h[8:], cw.salt1)
		binary.BigEndian.PutUint32(h[12:], cw.salt2)
		binary.BigEndian.PutUint32(h[16:], 0xc0ffee) // checksums are not checked
	}
	return h
}

func (cw *capWAL) off(idx uint32) int64 { return walFrameOffset(idx, cw.ps) }

// frame writes frame idx as SQLite does: header, then page (filled with fill).
func (cw *capWAL) frame(w *walFile, idx, pgno, dbSize uint32, fill byte) error {
	if _, err := w.WriteAt(cw.frameHeader(pgno, dbSize, false), cw.off(idx)); err != nil {
		return err
	}
	_, err := w.WriteAt(bytes.Repeat([]byte{fill}, int(cw.ps)), cw.off(idx)+walFrameHeaderSize)
	return err
}

func capMust(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

func TestCaptureWALSpillOverwriteRewrite(t *testing.T) {
	s := &capListSink{}
	cw := newCapWAL(t, s)
	w := cw.handle(false)
	capMust(t, cw.header(w, 0x1000, 0xabc))
	capMust(t, cw.frame(w, 1, 1, 2, 'a')) // first commit
	// A spilled transaction: frames 2..4 without the commit flag.
	capMust(t, cw.frame(w, 2, 3, 0, 'b'))
	capMust(t, cw.frame(w, 3, 4, 0, 'c'))
	capMust(t, cw.frame(w, 4, 9, 0, 'x')) // page 9, cut off by the commit's size
	require.Len(t, s.commits, 1, "a spill emitted a commit")
	// Page 3 overwritten in place (page only); checksums deferred: later
	// frame headers carry zero salts until the rewrite.
	_, err := w.WriteAt(bytes.Repeat([]byte{'B'}, capPS), cw.off(2)+walFrameHeaderSize)
	capMust(t, err)
	_, err = w.WriteAt(cw.frameHeader(5, 0, true), cw.off(5))
	capMust(t, err)
	_, err = w.WriteAt(bytes.Repeat([]byte{'d'}, capPS), cw.off(5)+walFrameHeaderSize)
	capMust(t, err)
	// The commit frame repeats page 4 (the last page always gets a new frame).
	_, err = w.WriteAt(cw.frameHeader(4, 5, true), cw.off(6))
	capMust(t, err)
	_, err = w.WriteAt(bytes.Repeat([]byte{'C'}, capPS), cw.off(6)+walFrameHeaderSize)
	capMust(t, err)
	if len(s.commits) != 2 {
		t.Fatalf("%d commits after the commit frame, want 2", len(s.commits))
	}
	// walRewriteChecksums: headers of frames 2..6 rewritten, final salts.
	for idx, pg := range map[uint32]uint32{2: 3, 3: 4, 4: 9, 5: 5} {
		_, err := w.WriteAt(cw.frameHeader(pg, 0, false), cw.off(idx))
		capMust(t, err)
	}
	_, err = w.WriteAt(cw.frameHeader(4, 5, false), cw.off(6))
	capMust(t, err)
	if len(s.commits) != 2 || len(s.broke) != 0 {
		t.Fatalf("header rewrites: %d commits, broken %v", len(s.commits), s.broke)
	}
	got := s.commits[1]
	want := map[uint32]byte{3: 'B', 4: 'C', 5: 'd'}
	if got.dbPages != 5 || !maps.Equal(got.pages, want) || !slices.IsSorted(got.order) {
		t.Errorf("commit: %d pages %v order %v, want 5 pages %v ascending", got.dbPages, got.pages, got.order, want)
	}
	// A rewrite that changes what was committed is not accounted for.
	_, err = w.WriteAt(cw.frameHeader(7, 5, false), cw.off(6))
	if err == nil || !errors.Is(errors.Join(s.broke...), errFrameGap) {
		t.Errorf("rewrite with another page number: %v, broken %v", err, s.broke)
	}
}

// A transaction spilled by one connection and rolled back leaves its frames;
// another connection's transaction writes over them, then the first
// connection writes again.
func TestCaptureWALRollbackOverwritten(t *testing.T) {
	s := &capListSink{}
	cw := newCapWAL(t, s)
	a, b := cw.handle(false), cw.handle(false)
	capMust(t, cw.header(a, 7, 8))
	capMust(t, cw.frame(a, 1, 1, 3, 'a'))
	for i := uint32(2); i <= 5; i++ {
		capMust(t, cw.frame(a, i, i, 0, 'r')) // spilled, then rolled back
	}
	capMust(t, cw.frame(b, 2, 2, 3, 'b')) // b commits over a's frame 2
	capMust(t, cw.frame(a, 3, 3, 3, 'A')) // a commits a short transaction at 3
	if len(s.broke) != 0 || len(s.commits) != 3 {
		t.Fatalf("%d commits, broken %v", len(s.commits), s.broke)
	}
	g := s.commits[1]
	assert.Equal(t, map[uint32]byte{2: 'b'}, g.pages, "b's commit")
	g = s.commits[2]
	assert.Equal(t, map[uint32]byte{3: 'A'}, g.pages, "a's commit after its rollback")
}

// psow=0: padding copies of the commit frame, split at the sync point even
// inside the frame header (testdata/wal-trace.txt, S7), are skipped; a real
// commit after them is not.
func TestCaptureWALPadding(t *testing.T) {
	s := &capListSink{}
	cw := newCapWAL(t, s)
	w := cw.handle(true)
	capMust(t, cw.header(w, 1, 2))
	capMust(t, cw.frame(w, 1, 2, 2, 'p'))
	hdr := cw.frameHeader(2, 2, false)
	binary.BigEndian.PutUint32(hdr[16:], 0x5eed) // another checksum: it chains
	for _, piece := range []struct {
		b   []byte
		off int64
	}{
		{hdr[:8], cw.off(2)}, {hdr[8:], cw.off(2) + 8},
		{bytes.Repeat([]byte{'p'}, 100), cw.off(2) + 24}, {bytes.Repeat([]byte{'p'}, capPS-100), cw.off(2) + 124},
	} {
		_, err := w.WriteAt(piece.b, piece.off)
		capMust(t, err)
	}
	capMust(t, cw.frame(w, 3, 2, 2, 'p')) // a second copy
	if len(s.commits) != 1 || cw.st.padFrames != 2 || cw.st.next != 4 {
		t.Fatalf("after padding: %d commits, %d padding frames, next %d", len(s.commits), cw.st.padFrames, cw.st.next)
	}
	capMust(t, cw.frame(w, 4, 2, 2, 'q')) // same page, new content: a commit
	if len(s.commits) != 2 || s.commits[1].pages[2] != 'q' {
		t.Fatalf("commit after padding: %d commits", len(s.commits))
	}
	// The window closes at the connection's commit phase two.
	w.db = &mainFile{st: cw.st, wal: w}
	w.db.CommitPhaseTwo()
	capMust(t, cw.frame(w, 5, 2, 2, 'q')) // identical, but a new transaction
	if len(s.commits) != 3 || len(s.broke) != 0 {
		t.Fatalf("identical commit after phase two: %d commits, broken %v", len(s.commits), s.broke)
	}
}

// Writes the capture cannot account for break replication, are refused
// before they reach the file, and so is everything after them.
func TestCaptureWALContinuity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kind      error
		run       func(cw *capWAL, w *walFile) error
		truncates bool // changes the file itself before the refused write
	}{
		{"gap", errFrameGap, func(cw *capWAL, w *walFile) error { return cw.frame(w, 4, 2, 2, 'g') }, false},
		{"into committed frame", errFrameGap, func(cw *capWAL, w *walFile) error { return cw.frame(w, 1, 2, 2, 'g') }, false},
		{"foreign salts", errGeneration, func(cw *capWAL, w *walFile) error {
			cw.salt1++
			return cw.frame(w, 3, 2, 2, 'g')
		}, false},
		{"restart skipping a generation", errGeneration, func(cw *capWAL, w *walFile) error { return cw.header(w, cw.salt1+2, 9) }, false},
		{"header part", errMalformedWrite, func(cw *capWAL, w *walFile) error {
			_, err := w.WriteAt(make([]byte, 8), 8)
			return err
		}, false},
		{"spanning frames", errMalformedWrite, func(cw *capWAL, w *walFile) error {
			_, err := w.WriteAt(make([]byte, capPS+walFrameHeaderSize+1), cw.off(3))
			return err
		}, false},
		{"truncation of committed frames", errFrameGap, func(cw *capWAL, w *walFile) error {
			capMust(cw.t, w.Truncate(cw.off(2)))
			return cw.frame(w, 3, 2, 2, 'g')
		}, true},
		{"frames after the WAL was emptied", errGeneration, func(cw *capWAL, w *walFile) error {
			capMust(cw.t, w.Truncate(0))
			return cw.frame(w, 1, 2, 2, 'g')
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &capListSink{}
			cw := newCapWAL(t, s)
			w := cw.handle(false)
			capMust(t, cw.header(w, 0x10, 0x20))
			capMust(t, cw.frame(w, 1, 1, 2, 'a'))
			capMust(t, cw.frame(w, 2, 2, 2, 'b'))
			before := slices.Clone(cw.file.b)
			err := tc.run(cw, w)
			if err == nil || !errors.Is(errors.Join(s.broke...), tc.kind) || len(s.broke) != 1 {
				t.Fatalf("err %v, broken %v, want one %v", err, s.broke, tc.kind)
			}
			if !tc.truncates && !bytes.Equal(before, cw.file.b) {
				t.Errorf("the refused write reached the file")
			}
			if err := cw.frame(w, 3, 2, 2, 'c'); err == nil || len(s.commits) != 2 {
				t.Errorf("write after broken: %v, %d commits", err, len(s.commits))
			}
		})
	}
}

// Restart rules: salt-1 + 1 after a committed generation; anything after
// the WAL was emptied or over a header with no commit under it.
func TestCaptureWALGenerations(t *testing.T) {
	s := &capListSink{}
	cw := newCapWAL(t, s)
	w := cw.handle(false)
	capMust(t, cw.header(w, 0xffffffff, 1))
	capMust(t, cw.header(w, 0x1234, 5)) // rolled-back first transaction: new random salts
	capMust(t, cw.frame(w, 1, 1, 1, 'a'))
	capMust(t, cw.header(w, 0x1235, 6)) // restart: salt-1 + 1
	capMust(t, cw.frame(w, 1, 1, 1, 'b'))
	capMust(t, w.Truncate(0))
	capMust(t, cw.header(w, 0x77, 7)) // emptied: fresh salts
	capMust(t, cw.frame(w, 1, 1, 1, 'c'))
	if len(s.commits) != 3 || len(s.broke) != 0 {
		t.Fatalf("%d commits, broken %v", len(s.commits), s.broke)
	}
	// A second handle opened now must find the WAL this process wrote.
	w2 := &walFile{passFile: passFile{cw.file}, st: cw.st, path: "/cap/db-wal"}
	capMust(t, cw.st.openWAL(w2))
	binary.BigEndian.PutUint32(cw.file.b[16:], 0x78) // someone rewrote the header
	w3 := &walFile{passFile: passFile{cw.file}, st: cw.st, path: "/cap/db-wal"}
	assert.ErrorIs(t, cw.st.openWAL(w3), errGeneration, "open over a foreign header")
}

// In the steady state a commit allocates nothing: page buffers and
// captured.Commit values come back from the sink's Release, slots and sort
// scratch are reused.
func TestCaptureWALNoAllocs(t *testing.T) {
	s := &capCountSink{}
	cw := newCapWAL(t, s)
	w := cw.handle(false)
	capMust(t, cw.header(w, 3, 4))
	hdr := cw.frameHeader(2, 2, false)
	page := bytes.Repeat([]byte{'z'}, capPS)
	idx := uint32(1)
	commit := func() {
		_, err := w.WriteAt(hdr, cw.off(idx))
		require.NoError(t, err)
		_, err = w.WriteAt(page, cw.off(idx)+walFrameHeaderSize)
		require.NoError(t, err)
		idx++
	}
	for range 10 {
		commit()
	}
	// The memory file grows by a frame per commit; give it room first.
	cw.file.b = slices.Grow(cw.file.b, 1000*int(walFrameHeaderSize+capPS))
	if a := testing.AllocsPerRun(500, commit); a != 0 && !race.Enabled {
		t.Errorf("%.1f allocations per commit, want 0", a)
	}
	if s.n.Load() < 500 {
		t.Errorf("%d commits", s.n.Load())
	}
}

// capChain writes frames with real chained checksums, as wal.c does: each
// frame continues the running checksum of the frame before; a rollback
// goes back to the last commit's.
type capChain struct {
	cw             *capWAL
	run, committed [2]uint32
	hdrCk          [2]uint32
}

func newCapChain(t *testing.T, cw *capWAL, w *walFile, salt1, salt2 uint32) *capChain {
	capMust(t, cw.header(w, salt1, salt2))
	ch := &capChain{cw: cw}
	ch.hdrCk = [2]uint32{be32(cw.file.b[24:28]), be32(cw.file.b[28:32])}
	ch.run, ch.committed = ch.hdrCk, ch.hdrCk
	return ch
}

// frame returns frame idx's bytes, continuing the chain.
func (ch *capChain) frame(pgno, dbSize uint32, fill byte) []byte {
	f := append(ch.cw.frameHeader(pgno, dbSize, false), bytes.Repeat([]byte{fill}, capPS)...)
	s1, s2 := walChecksum(f[:8], false, ch.run[0], ch.run[1])
	s1, s2 = walChecksum(f[walFrameHeaderSize:], false, s1, s2)
	binary.BigEndian.PutUint32(f[16:], s1)
	binary.BigEndian.PutUint32(f[20:], s2)
	ch.run = [2]uint32{s1, s2}
	if dbSize != 0 {
		ch.committed = ch.run
	}
	return f
}

func (ch *capChain) write(t *testing.T, w *walFile, idx, pgno, dbSize uint32, fill byte) {
	f := ch.frame(pgno, dbSize, fill)
	_, err := w.WriteAt(f[:walFrameHeaderSize], ch.cw.off(idx))
	capMust(t, err)
	_, err = w.WriteAt(f[walFrameHeaderSize:], ch.cw.off(idx)+walFrameHeaderSize)
	capMust(t, err)
}

func (ch *capChain) rollback() { ch.run = ch.committed }

// Before the WAL is restarted or emptied, the frame after the last commit
// is examined: ours rolled back, or a stale one of ours, is fine; a frame
// that chains from our last commit and that we did not write is not.
func TestCaptureWALForeignFrames(t *testing.T) {
	t.Run("ours rolled back", func(t *testing.T) {
		s := &capListSink{}
		cw := newCapWAL(t, s)
		w := cw.handle(false)
		ch := newCapChain(t, cw, w, 0x40, 0x41)
		ch.write(t, w, 1, 1, 2, 'a')
		ch.write(t, w, 2, 2, 0, 'r') // spilled, rolled back
		ch.write(t, w, 3, 1, 0, 'r')
		ch.rollback()
		capMust(t, w.Truncate(0))
		require.Len(t, s.broke, 0, "broken")
	})
	t.Run("ours from before the last commit", func(t *testing.T) {
		s := &capListSink{}
		cw := newCapWAL(t, s)
		w := cw.handle(false)
		ch := newCapChain(t, cw, w, 0x40, 0x41)
		ch.write(t, w, 1, 1, 2, 'a')
		for i := uint32(2); i <= 5; i++ {
			ch.write(t, w, i, i, 0, 'r') // spilled, rolled back
		}
		ch.rollback()
		ch.write(t, w, 2, 2, 2, 'b') // commits over frame 2: frame 3 is stale now
		capMust(t, cw.header(w, 0x41, 0x99))
		if len(s.broke) != 0 || len(s.commits) != 2 {
			t.Fatalf("%d commits, broken: %v", len(s.commits), s.broke)
		}
	})
	t.Run("foreign", func(t *testing.T) {
		s := &capListSink{}
		cw := newCapWAL(t, s)
		w := cw.handle(false)
		ch := newCapChain(t, cw, w, 0x40, 0x41)
		ch.write(t, w, 1, 1, 2, 'a')
		// Another writer commits frame 2 straight into the file.
		cw.file.WriteAt(ch.frame(2, 2, 'f'), cw.off(2))
		err := cw.header(w, 0x41, 0x99) // our restart after a checkpoint
		if err == nil || !errors.Is(errors.Join(s.broke...), errFrameGap) {
			t.Fatalf("restart over a foreign commit: %v, broken %v", err, s.broke)
		}
	})
}
