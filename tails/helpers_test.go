package tails

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// openTest opens a store in dir whose files are rewritten once their dead
// part passes rewriteMin (and their live part), so that tests reach
// rewrites without megabytes of appends.
func openTest(t testing.TB, dir string, cfg Config, rewriteMin int64) *Store {
	t.Helper()
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.rewriteMin = rewriteMin
	return s
}

// branchPoint and branchEntry give history branch b of an actor's log:
// branch b > 0 parts from branch 0 after seq 4*b, so branches agree on a
// prefix and differ past it. Bodies are of 0 to maxBody bytes, never zero
// bytes (so that a test controls where a file holds zeros), the same for
// one seq and branch every time.
func branchPoint(seq frames.Seq, b int) follow.Point {
	if seq <= frames.Seq(4*b) {
		b = 0
	}
	x := uint64(seq)*0x9e3779b97f4a7c15 + uint64(b)*0xbf58476d1ce4e5b9
	x = (x ^ x>>31) * 0x94d049bb133111eb
	return follow.Point{Seq: seq, Chain: frames.Checksum(x ^ x>>29)}
}

func branchEntry(seq frames.Seq, b, maxBody int) follow.Entry {
	p, q := branchPoint(seq-1, b), branchPoint(seq, b)
	if seq <= frames.Seq(4*b) {
		b = 0
	}
	r := rand.New(rand.NewPCG(uint64(seq), uint64(b)))
	body := make([]byte, r.IntN(maxBody+1))
	for i := range body {
		body[i] = byte(1 + r.IntN(255))
	}
	return follow.Entry{Seq: seq, Before: p.Chain, After: q.Chain, Body: body}
}

func branchEntries(after frames.Seq, n, b, maxBody int) []follow.Entry {
	var es []follow.Entry
	for i := range n {
		es = append(es, branchEntry(after+frames.Seq(i)+1, b, maxBody))
	}
	return es
}

// gen draws messages for a follower whose state is st: fences and appends
// of epochs near its promise, starting near its end, on the branch of
// their epoch mostly, with durable points that trim; now and then a reset
// of a new epoch, a copy, a gap, a message of another branch. Most are
// taken, many refused.
type gen struct {
	rng     *rand.Rand
	maxBody int
}

func (g *gen) next(st follow.State) follow.Message {
	r := g.rng
	epoch := max(st.Promised, 1)
	switch r.IntN(10) {
	case 0:
		epoch++
	case 1:
		epoch = max(epoch-1, 1)
	}
	if r.IntN(12) == 0 {
		return &follow.Fence{Epoch: epoch}
	}
	b := int(epoch % 3)
	if r.IntN(10) == 0 {
		b = r.IntN(3)
	}
	end := st.End().Seq
	start := frames.Seq(0)
	if d := frames.Seq(r.IntN(12)); end+3 >= d {
		start = end + 3 - d
	}
	reset := epoch != st.LogEpoch && r.IntN(4) != 0 || r.IntN(15) == 0
	if reset && start > 0 && r.IntN(2) == 0 {
		start = st.Base.Seq
	}
	n := r.IntN(6)
	if reset {
		n += int(end-min(end, start)) + r.IntN(3)
	}
	durable := st.Base
	switch r.IntN(8) {
	case 0:
		durable = branchPoint(start+frames.Seq(r.IntN(n+2)), b)
	case 1:
		if end > 12 {
			durable = branchPoint(end-frames.Seq(r.IntN(12)), b)
		}
	}
	if durable.Seq > start+frames.Seq(n) && r.IntN(2) == 0 {
		durable = branchPoint(start, b)
	}
	return &follow.Append{Epoch: epoch, Reset: reset, Prev: branchPoint(start, b), Durable: durable, Entries: branchEntries(start, n, b, g.maxBody)}
}

// sameState fails unless got and want hold the same log and epochs,
// bodies included.
func sameState(t testing.TB, got, want follow.State, format string, args ...any) {
	t.Helper()
	if err := diffState(got, want); err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

func diffState(got, want follow.State) error {
	switch {
	case got.Promised != want.Promised || got.LogEpoch != want.LogEpoch:
		return fmt.Errorf("epochs promised %d log %d, want %d, %d", got.Promised, got.LogEpoch, want.Promised, want.LogEpoch)
	case got.Base != want.Base:
		return fmt.Errorf("base %+v, want %+v", got.Base, want.Base)
	case len(got.Entries) != len(want.Entries):
		return fmt.Errorf("%d entries (through %d), want %d (through %d)", len(got.Entries), got.End().Seq, len(want.Entries), want.End().Seq)
	}
	for i := range got.Entries {
		g, w := got.Entries[i], want.Entries[i]
		if g.Seq != w.Seq || g.Before != w.Before || g.After != w.After || !bytes.Equal(g.Body, w.Body) {
			return fmt.Errorf("entry %d: seq %d, want seq %d with another chain or body", i, g.Seq, w.Seq)
		}
	}
	return nil
}

// sameReply fails unless got and want encode alike (nil alike).
func sameReply(t testing.TB, got, want follow.Message, step int) {
	t.Helper()
	if got == nil || want == nil {
		if got != nil || want != nil {
			t.Fatalf("step %d: reply %T, want %T", step, got, want)
		}
		return
	}
	g, err1 := follow.AppendMessage(nil, got, follow.Limits{})
	w, err2 := follow.AppendMessage(nil, want, follow.Limits{})
	if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
		t.Fatalf("step %d: reply %T %+v (%v), want %T %+v (%v)", step, got, got, err1, want, want, err2)
	}
}

// checkFileError fails unless err is a *FileError naming path and matching
// exactly one of the sentinels a file's damage may.
func checkFileError(t testing.TB, err error, path string) *FileError {
	t.Helper()
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != path {
		t.Fatalf("error %v (%T) does not name the file %s", err, err, path)
	}
	n := 0
	for _, s := range []error{frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v matches %d sentinels, want 1", err, n)
	}
	return fe
}

// recordStarts returns where each record of a file starts, and its end,
// from the lengths in their headers.
func recordStarts(t testing.TB, data []byte) []int64 {
	t.Helper()
	off := int64(headerFixedBytes + int(data[len(fileMagic)+1]))
	starts := []int64{}
	for off < int64(len(data)) {
		starts = append(starts, off)
		off += recordHeaderBytes + int64(binary.LittleEndian.Uint32(data[off:]))
	}
	if off != int64(len(data)) {
		t.Fatalf("records end at %d, the file at %d", off, len(data))
	}
	return append(starts, off)
}

func uint64Seq(n int) frames.Seq { return frames.Seq(n) }

func itoa(n int) string { return strconv.Itoa(n) }
