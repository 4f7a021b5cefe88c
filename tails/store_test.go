package tails

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// A second Open of a directory fails while the first is open, and works
// once it is closed. (TestAcknowledgedSurvivesSIGKILL checks the same
// across processes.)
func TestOpenLocksDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Config{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
	if _, err := s.Load("a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Load after Close: %v, want ErrClosed", err)
	}
}

// Load of an actor without a file is the zero state; Save, Load, Actors
// and Delete agree with each other and survive a reopen; Delete leaves the
// zero state and no file.
func TestSaveLoadDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Config{}, minRewriteBytes)
	st, err := s.Load("nobody")
	if err != nil || diffState(st, follow.State{}) != nil {
		t.Fatalf("Load of an actor with no file: %+v, %v", st, err)
	}
	a := follow.State{Promised: 3, LogEpoch: 2, Base: branchPoint(4, 0), Entries: branchEntries(4, 5, 0, 900)}
	b := follow.State{Promised: 1}
	for name, st := range map[string]follow.State{"a": a, "b": b} {
		if err := s.Save(name, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save("zero", follow.State{}); err != nil {
		t.Fatalf("Save of the zero state with no file: %v", err)
	}
	s.Close()
	s = openTest(t, dir, Config{}, minRewriteBytes)
	defer s.Close()
	if l, err := s.Actors(); err != nil || !slices.Equal(l, []string{"a", "b"}) {
		t.Fatalf("Actors: %q, %v", l, err)
	}
	for name, want := range map[string]follow.State{"a": a, "b": b} {
		got, err := s.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, got, want, "actor %s reopened", name)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.tailPath("a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file after Delete: %v", err)
	}
	if st, err := s.Load("a"); err != nil || diffState(st, follow.State{}) != nil {
		t.Fatalf("Load after Delete: %+v, %v", st, err)
	}
	if l, _ := s.Actors(); !slices.Equal(l, []string{"b"}) {
		t.Fatalf("Actors after Delete: %q", l)
	}
	if got, want := s.Bytes(), mustSize(t, s.tailPath("b")); got != want {
		t.Fatalf("Bytes %d, the files hold %d", got, want)
	}
}

func mustSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// Save refuses what follow.OpenFollower would and what takes a promise
// back, and keeps the state before; bad actor names are refused.
func TestSaveRefusesInvalid(t *testing.T) {
	lim := follow.Limits{MaxTailBytes: 4 << 10}
	s := openTest(t, t.TempDir(), Config{Limits: lim}, minRewriteBytes)
	defer s.Close()
	good := follow.State{Promised: 4, LogEpoch: 3, Entries: branchEntries(0, 3, 0, 100)}
	if err := s.Save("x", good); err != nil {
		t.Fatal(err)
	}
	broken := good
	broken.Entries = slices.Clone(good.Entries)
	broken.Entries[1].Before ^= 1
	for name, st := range map[string]follow.State{
		"unchained":          broken,
		"log past promise":   {Promised: 4, LogEpoch: 5},
		"lower promise":      {Promised: 3, LogEpoch: 3, Entries: good.Entries},
		"lower log epoch":    {Promised: 4, LogEpoch: 2},
		"past the bound":     {Promised: 4, LogEpoch: 3, Entries: branchEntries(0, 3, 0, 3000)},
		"epoch 0 with a log": {Entries: good.Entries},
		"the zero state":     {},
	} {
		if err := s.Save("x", st); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Save: %v, want ErrInvalid", name, err)
		}
	}
	st, err := s.Load("x")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, st, good, "after refused saves")
	for _, name := range []string{"", string(make([]byte, follow.MaxActorBytes+1))} {
		if _, err := s.Load(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("Load of a name of %d bytes: %v, want ErrInvalid", len(name), err)
		}
	}
	if err := s.Save(string(make([]byte, follow.MaxActorBytes)), good); err != nil {
		t.Errorf("Save under a name of follow.MaxActorBytes: %v", err)
	}
}

// Appending to a tail that the bucket keeps trimming rewrites the file once
// its dead part outgrows its live part: the file stays within its bound
// (twice the live part, the rewrite threshold, a record) and holds the
// same state, read back after a reopen.
func TestRewriteKeepsFileBounded(t *testing.T) {
	dir := t.TempDir()
	const rewriteMin = 8 << 10
	s := openTest(t, dir, Config{}, rewriteMin)
	ref := follow.NewFollower(follow.Limits{})
	reply, err := s.Handle("x", &follow.Append{Epoch: 1, Reset: true, Entries: branchEntries(0, 4, 0, 500)})
	ref.Handle(&follow.Append{Epoch: 1, Reset: true, Entries: branchEntries(0, 4, 0, 500)})
	if err != nil {
		t.Fatal(reply, err)
	}
	path := s.tailPath("x")
	first, _ := os.Stat(path)
	rewrites, prev := 0, first
	for seq := 4; seq < 600; seq++ {
		m := &follow.Append{Epoch: 1, Prev: branchPoint(uint64Seq(seq), 0), Durable: branchPoint(uint64Seq(seq-3), 0), Entries: branchEntries(uint64Seq(seq), 1, 0, 500)}
		want := ref.Handle(m)
		got, err := s.Handle("x", m)
		if err != nil {
			t.Fatal(err)
		}
		sameReply(t, got, want, seq)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(info, prev) {
			rewrites++
		}
		prev = info
		live := fileBytes("x", ref.Bytes())
		if bound := 2*live + rewriteMin + recordHeaderBytes + 64 + 3*500; info.Size() > bound {
			t.Fatalf("seq %d: file of %d bytes, past %d (live %d)", seq, info.Size(), bound, live)
		}
	}
	if rewrites < 10 {
		t.Fatalf("%d rewrites in 600 appends", rewrites)
	}
	s.Close()
	s = openTest(t, dir, Config{}, rewriteMin)
	defer s.Close()
	st, err := s.Load("x")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, st, ref.State(), "reopened after %d rewrites", rewrites)
}

// Open removes a rewrite a crash left unfinished (never renamed: the file
// it was to replace holds the state) and does not count it.
func TestOpenRemovesUnfinishedRewrite(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Config{}, minRewriteBytes)
	want := follow.State{Promised: 2, LogEpoch: 2, Entries: branchEntries(0, 2, 0, 100)}
	if err := s.Save("x", want); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tmp := filepath.Join(dir, fileName("x")+tmpSuffix)
	if err := os.WriteFile(tmp, []byte("half a rewrite"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.txt")
	os.WriteFile(other, []byte("not the store's"), 0o600)
	s = openTest(t, dir, Config{}, minRewriteBytes)
	defer s.Close()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unfinished rewrite still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file not the store's was touched: %v", err)
	}
	st, err := s.Load("x")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, st, want, "reopened")
	if got, want := s.Bytes(), mustSize(t, s.tailPath("x")); got != want {
		t.Fatalf("Bytes %d, want the actor's file alone, %d", got, want)
	}
}

// Save writes the state it is given, not one that merely agrees on chain
// values: an entry whose body changed under the same seq and chain values
// is written again, in a whole state.
func TestSaveWritesBodiesGiven(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Config{}, minRewriteBytes)
	a := follow.State{Promised: 1, LogEpoch: 1, Entries: branchEntries(0, 3, 0, 100)}
	if err := s.Save("x", a); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Entries = append(slices.Clone(a.Entries), branchEntry(4, 0, 100))
	b.Entries[1].Body = []byte("another body")
	if err := s.Save("x", b); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, Config{}, minRewriteBytes)
	defer s.Close()
	st, err := s.Load("x")
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, st, b, "reopened")
}

// The follower ID belongs to the directory: the same after a reopen, a
// new one for a new directory, and a damaged one is refused, never
// replaced.
func TestStoreID(t *testing.T) {
	dir := t.TempDir()
	open := func(dir string) *Store {
		t.Helper()
		s, err := Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(dir)
	id := s.ID()
	if len(id) != 16 || !frames.ValidNodeID(id) {
		t.Fatalf("ID %q is not 16 hex digits", id)
	}
	s.Close()
	if s = open(dir); s.ID() != id {
		t.Fatalf("reopened store has ID %q, was %q", s.ID(), id)
	}
	s.Close()
	other := open(t.TempDir())
	if other.ID() == id {
		t.Fatalf("two stores share ID %q", id)
	}
	other.Close()

	path := filepath.Join(dir, idFile)
	if err := os.WriteFile(path, []byte("not-an-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Config{}); !errors.Is(err, frames.ErrCorrupt) {
		t.Fatalf("Open with a damaged ID: %v, want frames.ErrCorrupt", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "not-an-id\n" {
		t.Fatalf("damaged ID replaced by %q", b)
	}
}

// The generation is the store's, durably: 0 at first, what SetGeneration
// made it after a reopen; Reidentify draws a new ID, durably, at
// generation 0, keeping the actors' files; a damaged generation is
// refused, naming the file.
func TestStoreGeneration(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g := s.Generation(); g != 0 {
		t.Fatalf("a new store is at generation %d", g)
	}
	es := branchEntries(0, 3, 0, 16)
	if _, err := s.Handle("a", &follow.Append{Epoch: 1, Reset: true, Entries: es}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGeneration(7); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close()
	if s, err = Open(dir, Config{}); err != nil || s.Generation() != 7 || s.ID() != id {
		t.Fatalf("reopened: generation %d, ID %s (was %s), %v", s.Generation(), s.ID(), id, err)
	}
	old, err := s.Reidentify()
	if err != nil || old != id || s.ID() == id || s.Generation() != 0 {
		t.Fatalf("Reidentify: old %s, now %s at %d, %v", old, s.ID(), s.Generation(), err)
	}
	fresh := s.ID()
	s.Close()
	if s, err = Open(dir, Config{}); err != nil || s.ID() != fresh || s.Generation() != 0 {
		t.Fatalf("reopened after Reidentify: %s at %d, %v", s.ID(), s.Generation(), err)
	}
	if st, err := s.Load("a"); err != nil || st.End() != es[2].Point() {
		t.Fatalf("the actor's tail after Reidentify: %+v, %v", st, err)
	}
	s.Close()
	path := filepath.Join(dir, genFile)
	if err := os.WriteFile(path, []byte("07\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Config{}); !errors.Is(err, frames.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open with a damaged generation: %v, want frames.ErrCorrupt naming %s", err, path)
	}
}
