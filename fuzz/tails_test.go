package fuzz

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/tails"
)

// A follower's store (package tails) reads its files like bucket data: any
// bytes either load as a state that follow.OpenFollower accepts, or fail
// with a *tails.FileError naming the file and matching one sentinel,
// allocating no more than a small multiple of their length; and a store
// that loaded a file (a torn end cut off) goes on writing it.

// tailsLimits make a length field's claim (up to a record of a whole
// tail) far larger than what a short input may allocate.
var tailsLimits = follow.Limits{MaxTailBytes: 1 << 20}

// tailsActor is the actor of tails/testdata/golden/file.tail.
const tailsActor = "golden"

// tailsSeeds are files the store wrote: the golden file, and files of a
// reset, changes that trim and extend, a reset of a new epoch, one cut
// inside its last record.
func tailsSeeds(t testing.TB) [][]byte {
	golden, err := os.ReadFile(filepath.Join("..", "tails", "testdata", "golden", "file.tail"))
	if err != nil {
		t.Fatal(err)
	}
	seeds := [][]byte{golden}
	dir, err := os.MkdirTemp("", "fuzz-tails-seeds")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := tails.Open(dir, tails.Config{Limits: tailsLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(dir, hex.EncodeToString([]byte(tailsActor))+".tail")
	es := branchEntries(0, 12, 0)
	msgs := []follow.Message{
		&follow.Append{Epoch: 1, Reset: true, Entries: es[:3]},
		&follow.Append{Epoch: 1, Prev: es[2].Point(), Durable: es[0].Point(), Entries: es[3:6]},
		&follow.Fence{Epoch: 2},
		&follow.Append{Epoch: 2, Reset: true, Prev: es[0].Point(), Durable: es[0].Point(), Entries: es[1:9]},
		&follow.Append{Epoch: 2, Prev: es[8].Point(), Durable: es[5].Point(), Entries: es[9:12]},
		&follow.Append{Epoch: 3, Reset: true, Prev: es[2].Point(), Entries: branchEntries(3, 4, 1)},
	}
	for _, m := range msgs {
		reply, err := s.Handle(tailsActor, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := reply.(*follow.Refuse); ok {
			t.Fatalf("seed message %T refused: %+v", m, reply)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	last := seeds[len(seeds)-1]
	return append(seeds, last[:len(last)-5])
}

func checkTailsErr(t *testing.T, err error, path string) {
	t.Helper()
	var fe *tails.FileError
	if !errors.As(err, &fe) || fe.Path != path {
		t.Fatalf("error %v (%T) does not name the file %s", err, err, path)
	}
	oneSentinel(t, err, damageSentinels...)
}

func FuzzTailsFile(f *testing.F) {
	for _, s := range tailsSeeds(f) {
		f.Add(false, s)
		f.Add(true, s)
	}
	dir := fuzzDir(f)
	path := filepath.Join(dir, hex.EncodeToString([]byte(tailsActor))+".tail")
	f.Fuzz(func(t *testing.T, fixCRCs bool, data []byte) {
		if fixCRCs {
			data = withTailsCRCs(data)
		}
		checkTailsFile(t, dir, path, data)
	})
}

// withTailsCRCs returns data with the CRCs of its header, its records'
// headers and their messages set to what the bytes give, as far as the
// lengths in it reach, so the fuzzer explores what the records say rather
// than the checksums.
func withTailsCRCs(data []byte) []byte {
	data = bytes.Clone(data)
	crc := func(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
	if len(data) < 10 {
		return data
	}
	off := 10 + int(data[9]) + 4
	if off > len(data) {
		return data
	}
	binary.LittleEndian.PutUint32(data[off-4:], crc(data[:off-4]))
	for off+8 <= len(data) {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		binary.LittleEndian.PutUint32(data[off+4:], crc(data[off:off+4]))
		off += 8
		if n < 4 || n > len(data)-off {
			break
		}
		binary.LittleEndian.PutUint32(data[off+n-4:], crc(data[off:off+n-4]))
		off += n
	}
	return data
}

// checkTailsFile writes data as tailsActor's file in dir, opens a store
// there and loads it, and checks what FuzzTailsFile promises.
func checkTailsFile(t *testing.T, dir, path string, data []byte) {
	defer os.Remove(path)
	// Writing the file and opening a store are repeatable, so that the
	// fuzzing engine's own allocations can be told from the store's.
	var st follow.State
	var err error
	load := func() {
		if werr := os.WriteFile(path, data, 0o600); werr != nil {
			t.Fatal(werr)
		}
		s, oerr := tails.Open(dir, tails.Config{Limits: tailsLimits})
		if oerr != nil {
			t.Fatal(oerr)
		}
		defer s.Close()
		st, err = s.Load(tailsActor)
	}
	bound := uint64(16*len(data)) + 64<<10
	if alloc := allocatedWithin(bound, load); alloc > bound {
		t.Fatalf("opening a store over %d bytes allocated %d", len(data), alloc)
	}
	if err != nil {
		checkTailsErr(t, err, path)
		return
	}
	s, err := tails.Open(dir, tails.Config{Limits: tailsLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// It reads the same again: a torn end was cut off, not left to be
	// read some other way.
	again, err := s.Load(tailsActor)
	if err != nil {
		t.Fatalf("loaded once, then: %v", err)
	}
	sameTailsState(t, again, st, "loaded again")
	fl, err := follow.OpenFollower(st, tailsLimits)
	if err != nil {
		t.Fatalf("loaded a state follow refuses: %v", err)
	}
	// The store writes on from it as the follower does: a promise of the next epoch and a reset that extends the
	// log. Reopened, it reads back the follower's state.
	next := st.Promised + 1
	es := append(slices.Clone(st.Entries), follow.Entry{Seq: st.End().Seq + 1, Before: st.End().Chain, After: 7, Body: []byte("next")})
	for _, m := range []follow.Message{&follow.Fence{Epoch: next}, &follow.Append{Epoch: next, Reset: true, Prev: st.Base, Durable: st.Base, Entries: es}} {
		want := fl.Handle(m)
		got, err := s.Handle(tailsActor, m)
		if err != nil {
			t.Fatalf("%T after loading: %v", m, err)
		}
		g, _ := follow.AppendMessage(nil, got, tailsLimits)
		w, _ := follow.AppendMessage(nil, want, tailsLimits)
		if (got == nil) != (want == nil) || string(g) != string(w) {
			t.Fatalf("%T after loading: reply %+v, the follower's %+v", m, got, want)
		}
	}
	s.Close()
	s2, err := tails.Open(dir, tails.Config{Limits: tailsLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after, err := s2.Load(tailsActor)
	if err != nil {
		t.Fatalf("written on after loading, then: %v", err)
	}
	sameTailsState(t, after, fl.State(), "written on and reloaded")
}

func sameTailsState(t *testing.T, got, want follow.State, what string) {
	t.Helper()
	g, err1 := follow.AppendMessage(nil, &follow.Promise{Epoch: max(got.Promised, 1), LogEpoch: got.LogEpoch, Base: got.Base, Entries: got.Entries}, tailsLimits)
	w, err2 := follow.AppendMessage(nil, &follow.Promise{Epoch: max(want.Promised, 1), LogEpoch: want.LogEpoch, Base: want.Base, Entries: want.Entries}, tailsLimits)
	if err1 != nil || err2 != nil || string(g) != string(w) || got.Promised != want.Promised {
		t.Fatalf("%s: state %+v, want %+v (%v, %v)", what, got, want, err1, err2)
	}
}

// fuzzDir is a directory for the target's files, on a tmpfs when the
// machine has one at /dev/shm: each execution fsyncs its file a few times,
// which on a disk makes a run of 30,000 take many minutes. The fsyncs
// themselves are package tails's tests' concern, on a disk.
func fuzzDir(f *testing.F) string {
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "fuzz-tails"); err == nil {
			f.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return f.TempDir()
}
