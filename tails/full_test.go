package tails

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/framectl/framectl/follow"
)

// fillUp sends actor's follower Appends of one entry until one cannot be
// made durable, and checks that answer: a refusal as full reporting the
// state the disk holds, the error matching ErrFull, that state kept (in
// memory, and the follower's: the same message again is refused again,
// not acknowledged from a state that never reached the disk) and read
// back after a reopen. check runs after every step. It returns the state
// and the message refused.
func fillUp(t *testing.T, s *Store, cfg Config, check func()) (durable follow.State, refused *follow.Append) {
	t.Helper()
	actor := "x"
	if _, err := s.Handle(actor, &follow.Append{Epoch: 1, Reset: true, Entries: branchEntries(0, 1, 0, 1000)}); err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq < 10000; seq++ {
		durable, _ = s.Load(actor)
		size := mustSize(t, s.tailPath(actor))
		m := &follow.Append{Epoch: 1, Prev: branchPoint(uint64Seq(seq), 0), Entries: branchEntries(uint64Seq(seq), 1, 0, 1000)}
		reply, err := s.Handle(actor, m)
		check()
		if err == nil {
			if _, ok := reply.(*follow.Ack); !ok {
				t.Fatalf("seq %d: reply %+v, want an ack", seq, reply)
			}
			continue
		}
		if !errors.Is(err, ErrFull) || (cfg.MaxBytes == 0 && !errors.Is(err, syscall.ENOSPC)) {
			t.Fatalf("seq %d: %v, want ErrFull (and ENOSPC, without a bound)", seq, err)
		}
		want := &follow.Refuse{Epoch: 1, Reason: follow.RefuseFull, Newest: durable.Promised, End: durable.End()}
		sameReply(t, reply, want, seq)
		if got := mustSize(t, s.tailPath(actor)); got != size {
			t.Fatalf("seq %d: the file holds %d bytes after the refusal, %d before", seq, got, size)
		}
		st, lerr := s.Load(actor)
		if lerr != nil {
			t.Fatal(lerr)
		}
		sameState(t, st, durable, "seq %d: after the refusal", seq)
		again, err2 := s.Handle(actor, m)
		if !errors.Is(err2, ErrFull) {
			t.Fatalf("seq %d: the same message again: %+v, %v; want it refused as full again", seq, again, err2)
		}
		sameReply(t, again, want, seq)
		return durable, m
	}
	t.Fatal("never full")
	return follow.State{}, nil
}

// Past Config.MaxBytes, Handle answers full and the state stays the one
// on disk; the store never holds more than its bound. Once space is freed
// (another actor deleted), the follower goes on from the state on disk:
// the message after the refused one is a gap, not an extension of what
// never landed.
func TestStoreBoundAnswersFull(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{MaxBytes: 20 << 10}
	s := openTest(t, dir, cfg, minRewriteBytes)
	if err := s.Save("pad", follow.State{Promised: 1, LogEpoch: 1, Entries: branchEntries(0, 4, 0, 1000)}); err != nil {
		t.Fatal(err)
	}
	check := func() {
		if s.Bytes() > cfg.MaxBytes {
			t.Fatalf("store holds %d bytes, past its bound of %d", s.Bytes(), cfg.MaxBytes)
		}
	}
	durable, refused := fillUp(t, s, cfg, check)
	// A new actor's file does not fit either, and leaves nothing behind.
	before := s.Bytes()
	err := s.Save("y", follow.State{Promised: 1, LogEpoch: 1, Entries: branchEntries(0, 8, 0, 1000)})
	if !errors.Is(err, ErrFull) {
		t.Fatalf("Save of a new actor past the bound: %v, want ErrFull", err)
	}
	if l, _ := s.Actors(); len(l) != 2 || s.Bytes() != before {
		t.Fatalf("after a refused new file: actors %q, %d bytes (before %d)", l, s.Bytes(), before)
	}
	if err := s.Delete("pad"); err != nil {
		t.Fatal(err)
	}
	end := refused.Prev.Seq + 1
	next := &follow.Append{Epoch: 1, Prev: branchPoint(end, 0), Entries: branchEntries(end, 1, 0, 10)}
	reply, err := s.Handle("x", next)
	if err != nil {
		t.Fatal(err)
	}
	sameReply(t, reply, &follow.Refuse{Epoch: 1, Reason: follow.RefuseGap, Newest: 1, End: durable.End()}, 0)
	reply, err = s.Handle("x", refused)
	if err != nil {
		t.Fatal(err)
	}
	sameReply(t, reply, &follow.Ack{Epoch: 1, End: branchPoint(end, 0)}, 0)
	reopenSame(t, s, dir, cfg)
}

// reopenSame closes s and checks that a reopened store loads every actor
// as s held it.
func reopenSame(t *testing.T, s *Store, dir string, cfg Config) {
	t.Helper()
	actors, _ := s.Actors()
	want := map[string]follow.State{}
	for _, a := range actors {
		want[a], _ = s.Load(a)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, dir, cfg, minRewriteBytes)
	defer s2.Close()
	for _, a := range actors {
		st, err := s2.Load(a)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, st, want[a], "actor %q reopened", a)
	}
}

// A disk that fills (a 64 KiB tmpfs: ENOSPC from write) is answered like
// the store's bound, the failed record cut off again; a new actor's file
// that does not fit leaves no temporary file. Needs root, to mount.
func TestDiskFullAnswersFull(t *testing.T) {
	dir := smallDisk(t, 64<<10)
	cfg := Config{}
	s := openTest(t, dir, cfg, minRewriteBytes)
	defer s.Close()
	fillUp(t, s, cfg, func() {})
	err := s.Save("y", follow.State{Promised: 1, LogEpoch: 1, Entries: branchEntries(0, 40, 0, 1000)})
	if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Save of a new actor on a full disk: %v, want ErrFull and ENOSPC", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fileName("y")+tmpSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
	if st, err := s.Load("y"); err != nil || st.Promised != 0 {
		t.Fatalf("actor y after the refused Save: %+v, %v", st, err)
	}
	reopenSame(t, s, dir, cfg)
}

// smallDisk mounts a tmpfs of size bytes for the test.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to mount a small tmpfs")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("mounting a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Lazily if a store the test failed to close still holds a file.
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			if out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput(); err2 != nil {
				t.Errorf("umount %s: %v: %s; lazily: %v: %s", dir, err, out, err2, out2)
			}
		}
	})
	return dir
}
