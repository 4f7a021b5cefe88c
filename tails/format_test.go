package tails

import (
	"bytes"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/follow"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the writer")

// goldenStates are saved in turn as actor "golden": a whole state, a change
// (trimmed at its start, extended at its end), a reset of a new epoch (a
// whole state again). testdata/golden/file.tail pins the file they give.
func goldenStates() []follow.State {
	base := follow.Point{Seq: 41, Chain: 0x1122334455667788}
	e42 := follow.Entry{Seq: 42, Before: base.Chain, After: 0x0102030405060708, Body: []byte("commit 42")}
	e43 := follow.Entry{Seq: 43, Before: e42.After, After: 0xa1a2a3a4a5a6a7a8}
	e44 := follow.Entry{Seq: 44, Before: e43.After, After: 0xb1b2b3b4b5b6b7b8, Body: []byte("commit 44")}
	e44b := follow.Entry{Seq: 44, Before: e43.After, After: 0xc1c2c3c4c5c6c7c8, Body: []byte("commit 44, epoch 8")}
	return []follow.State{
		{Promised: 7, LogEpoch: 7, Base: base, Entries: []follow.Entry{e42, e43}},
		{Promised: 7, LogEpoch: 7, Base: e42.Point(), Entries: []follow.Entry{e43, e44}},
		{Promised: 8, LogEpoch: 8, Base: e42.Point(), Entries: []follow.Entry{e43, e44b}},
	}
}

func TestFileGolden(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Config{}, minRewriteBytes)
	for _, st := range goldenStates() {
		if err := s.Save("golden", st); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	got := mustRead(t, filepath.Join(dir, fileName("golden")))
	path := filepath.Join("testdata", "golden", "file.tail")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := mustRead(t, path)
	if !bytes.Equal(got, want) {
		t.Fatalf("the writer gives\n%x\nthe golden file holds\n%x", got, want)
	}
	states := goldenStates()
	st, err, s2, _ := loadActorFile(t, t.TempDir(), "golden", want, follow.Limits{})
	s2.Close()
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, st, states[len(states)-1], "golden file read back")
}

// The layout drawn in doc.go, byte by byte, for a file of one whole state
// and one change.
func TestFileLayout(t *testing.T) {
	e1 := follow.Entry{Seq: 1, Before: 0, After: 9, Body: []byte{0xee}}
	e2 := follow.Entry{Seq: 2, Before: 9, After: 10}
	dir := t.TempDir()
	s := openTest(t, dir, Config{}, minRewriteBytes)
	if err := s.Save("ab", follow.State{Promised: 3, LogEpoch: 2, Entries: []follow.Entry{e1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save("ab", follow.State{Promised: 4, LogEpoch: 2, Base: e1.Point(), Entries: []follow.Entry{e2}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got := mustRead(t, filepath.Join(dir, "6162.tail"))

	le := binary.LittleEndian
	crc := func(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
	want := []byte("fctltail")
	want = append(want, 1, 2, 'a', 'b')
	want = le.AppendUint32(want, crc(want))
	record := func(msg []byte) {
		msg = le.AppendUint32(msg, crc(msg))
		n := le.AppendUint32(nil, uint32(len(msg)))
		want = append(le.AppendUint32(append(want, n...), crc(n)), msg...)
	}
	// Promise: epoch 3, log epoch 2, base (0, 0), one entry.
	p := []byte{1, 2}
	p = le.AppendUint64(le.AppendUint64(p, 3), 2)
	p = le.AppendUint64(le.AppendUint64(p, 0), 0)
	p = le.AppendUint32(p, 1)
	p = le.AppendUint64(le.AppendUint64(le.AppendUint64(p, 1), 0), 9)
	p = append(le.AppendUint32(p, 1), 0xee)
	record(p)
	// Append: epoch 4, flags 0, prev = the end (1, 9), durable = the new
	// base (1, 9), one entry with no body.
	a := []byte{1, 3}
	a = append(le.AppendUint64(a, 4), 0)
	a = le.AppendUint64(le.AppendUint64(a, 1), 9)
	a = le.AppendUint64(le.AppendUint64(a, 1), 9)
	a = le.AppendUint32(a, 1)
	a = le.AppendUint64(le.AppendUint64(le.AppendUint64(a, 2), 9), 10)
	a = le.AppendUint32(a, 0)
	record(a)
	if !bytes.Equal(got, want) {
		t.Fatalf("file\n%x\nthe drawing gives\n%x", got, want)
	}
}
