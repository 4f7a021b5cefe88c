package tails

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/follow"
)

const crashActor = "crash"

// crashFile is a file written through Handle: a reset of epoch 1 (the
// file's first record, by rename), then one Append record per message of
// more, and the states after each message.
type crashFile struct {
	data   []byte
	starts []int64 // where each record starts, then the file's end
	states []follow.State
	last   follow.Message // the message that wrote the last record
}

func writeCrashFile(t *testing.T, lim follow.Limits, more []follow.Message) crashFile {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, Config{Limits: lim}, minRewriteBytes)
	defer s.Close()
	msgs := append([]follow.Message{&follow.Append{Epoch: 1, Reset: true, Entries: branchEntries(0, 3, 0, 100)}}, more...)
	var cf crashFile
	for i, m := range msgs {
		reply, err := s.Handle(crashActor, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := reply.(*follow.Ack); !ok {
			t.Fatalf("message %d: reply %T %+v, want an ack", i, reply, reply)
		}
		st, _ := s.Load(crashActor)
		cf.states = append(cf.states, st)
	}
	data, err := os.ReadFile(s.tailPath(crashActor))
	if err != nil {
		t.Fatal(err)
	}
	cf.data, cf.last = data, msgs[len(msgs)-1]
	cf.starts = recordStarts(t, data)
	if len(cf.starts) != len(msgs)+1 {
		t.Fatalf("%d records for %d messages", len(cf.starts)-1, len(msgs))
	}
	return cf
}

// appendsAfter are n Appends of epoch 1 of one entry each, after the
// reset's three, the durable point moving now and then.
func appendsAfter(n, maxBody int) []follow.Message {
	var ms []follow.Message
	for i := range n {
		seq := 3 + i
		durable := follow.Point{}
		if i >= 2 {
			durable = branchPoint(uint64Seq(i-1), 0)
		}
		ms = append(ms, &follow.Append{Epoch: 1, Prev: branchPoint(uint64Seq(seq), 0), Durable: durable, Entries: branchEntries(uint64Seq(seq), 1, 0, maxBody)})
	}
	return ms
}

// loadFile opens a store in dir holding data as the crash actor's file
// (and nothing else), and loads the actor.
func loadFile(t *testing.T, dir string, data []byte, lim follow.Limits) (follow.State, error, *Store, string) {
	t.Helper()
	return loadActorFile(t, dir, crashActor, data, lim)
}

func loadActorFile(t *testing.T, dir, actor string, data []byte, lim follow.Limits) (follow.State, error, *Store, string) {
	t.Helper()
	path := filepath.Join(dir, fileName(actor))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, Config{Limits: lim}, minRewriteBytes)
	st, err := s.Load(actor)
	return st, err, s, path
}

var crashLimits = follow.Limits{MaxTailBytes: 64 << 10}

// A crash while the last record is written leaves the file cut anywhere
// in it: the store opens with the state before that record, cuts the file
// back to the record's start, and takes the lost message again as if new.
// For a last record that is a change and for one that is a whole state (a
// reset of a new epoch).
func TestTornLastRecordIsDropped(t *testing.T) {
	for name, more := range map[string][]follow.Message{
		"change": appendsAfter(4, 100),
		"whole":  append(appendsAfter(3, 100), &follow.Append{Epoch: 2, Reset: true, Prev: branchPoint(4, 0), Entries: branchEntries(4, 2, 2, 100)}),
	} {
		t.Run(name, func(t *testing.T) {
			cf := writeCrashFile(t, crashLimits, more)
			k := len(cf.states) - 1
			lastStart, end := cf.starts[k], cf.starts[k+1]
			dir := t.TempDir()
			for cut := lastStart; cut < end; cut++ {
				st, err, s, path := loadFile(t, dir, cf.data[:cut], crashLimits)
				if err != nil {
					t.Fatalf("cut at %d of the last record [%d, %d): %v", cut, lastStart, end, err)
				}
				sameState(t, st, cf.states[k-1], "cut at %d", cut)
				if info, err := os.Stat(path); err != nil || info.Size() != lastStart {
					t.Fatalf("cut at %d: the file is not cut back to %d: %v, %v", cut, lastStart, info.Size(), err)
				}
				if _, err := s.Handle(crashActor, cf.last); err != nil {
					t.Fatal(err)
				}
				s.Close()
				st, err, s, _ = loadFile(t, dir, mustRead(t, path), crashLimits)
				if err != nil {
					t.Fatalf("cut at %d, message taken again: %v", cut, err)
				}
				sameState(t, st, cf.states[k], "cut at %d, message taken again, reopened", cut)
				s.Close()
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A byte changed anywhere before the last record (header, first record,
// any change) is an error naming the file, whatever the byte: records
// after it prove it was fsynced. So is a byte of the last record changed
// into anything but zero, since a crash does not leave that.
func TestDamageIsAnError(t *testing.T) {
	cf := writeCrashFile(t, crashLimits, appendsAfter(4, 100))
	k := len(cf.states) - 1
	last := cf.data[cf.starts[k]:]
	if hasZeroSector(cf.starts[k], last) {
		t.Fatal("the test's last record holds a zero piece of a sector; change its sizes")
	}
	dir := t.TempDir()
	for off := range cf.data {
		data := bytes.Clone(cf.data)
		if data[off] ^= 0x01; data[off] == 0 {
			data[off] = 0x02
		}
		st, err, s, path := loadFile(t, dir, data, crashLimits)
		s.Close()
		if err == nil {
			t.Fatalf("byte %d changed (record starts %v): loaded %+v", off, cf.starts, st)
		}
		checkFileError(t, err, path)
	}
}

// What a crash leaves of a last record that the disk wrote in part, its
// size grown but a sector of it never written (read back as zeros), is
// dropped like a record cut short; a zeroed record header in the middle
// of the file, with records after it, is an error.
func TestZeroedSectors(t *testing.T) {
	more := appendsAfter(4, 300)
	big := branchEntry(8, 0, 0)
	big.Body = bytes.Repeat([]byte{0x5a}, 2000)
	more = append(more, &follow.Append{Epoch: 1, Prev: branchPoint(7, 0), Entries: []follow.Entry{big}})
	cf := writeCrashFile(t, crashLimits, more)
	k := len(cf.states) - 1
	lastStart, end := cf.starts[k], cf.starts[k+1]
	firstBoundary := (lastStart/sectorBytes + 1) * sectorBytes
	if end-firstBoundary < 2*sectorBytes {
		t.Fatalf("the last record [%d, %d) spans too few sectors for the test", lastStart, end)
	}
	dir := t.TempDir()
	zero := func(from, to int64) []byte {
		data := bytes.Clone(cf.data)
		clear(data[from:to])
		return data
	}
	for name, data := range map[string][]byte{
		"whole record":           zero(lastStart, end),
		"first piece":            zero(lastStart, firstBoundary),
		"a sector inside":        zero(firstBoundary, firstBoundary+sectorBytes),
		"from a sector to end":   zero(firstBoundary+sectorBytes, end),
		"header, rest written":   zero(lastStart, lastStart+recordHeaderBytes),
		"zeros past a full file": append(bytes.Clone(cf.data[:lastStart]), make([]byte, end-lastStart)...),
	} {
		st, err, s, _ := loadFile(t, dir, data, crashLimits)
		s.Close()
		if err != nil {
			t.Fatalf("%s zeroed: %v", name, err)
		}
		sameState(t, st, cf.states[k-1], "%s zeroed", name)
	}
	mid := cf.starts[k-1]
	_, err, s, path := loadFile(t, dir, zero(mid, mid+recordHeaderBytes), crashLimits)
	s.Close()
	checkFileError(t, err, path)
}

// The first record is written whole by rename: cut short, it is an error,
// not a torn record, and so is a file with a header and no record.
func TestFirstRecordNeverTorn(t *testing.T) {
	cf := writeCrashFile(t, crashLimits, nil)
	dir := t.TempDir()
	for cut := int64(0); cut < cf.starts[1]; cut++ {
		_, err, s, path := loadFile(t, dir, cf.data[:cut], crashLimits)
		s.Close()
		checkFileError(t, err, path)
	}
}
