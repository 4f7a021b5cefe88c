package compact

import (
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

func TestDue(t *testing.T) {
	for _, c := range []struct {
		name            string
		logBytes, dbLen int64
		due             bool
	}{
		{"no log", 0, 4096, false},
		{"no log, empty database", 0, 0, false},
		{"any log over an empty database", 1, 0, true},
		{"log one byte short", 4095, 4096, false},
		{"log exactly the database", 4096, 4096, true},
		{"log past the database", 1 << 30, 4096, true},
		{"small log, big database", 1 << 20, 1 << 30, false},
		{"big database reached", 1 << 40, 1 << 40, true},
	} {
		if got := Due(c.logBytes, c.dbLen); got != c.due {
			t.Errorf("%s: Due(%d, %d) = %v, want %v", c.name, c.logBytes, c.dbLen, got, c.due)
		}
	}
}

// TestRuleDue: Rule.Due is Due with a minimum log; the zero Rule's is
// DefaultMinLogBytes, a negative one is none.
func TestRuleDue(t *testing.T) {
	for _, c := range []struct {
		r               Rule
		logBytes, dbLen int64
		due             bool
	}{
		{Rule{}, DefaultMinLogBytes - 1, 4096, false},
		{Rule{}, DefaultMinLogBytes, 4096, true},
		{Rule{}, DefaultMinLogBytes, 1 << 30, false}, // the size rule still applies
		{Rule{}, 1 << 30, 1 << 30, true},
		{Rule{MinLogBytes: 100}, 99, 10, false},
		{Rule{MinLogBytes: 100}, 100, 10, true},
		{Rule{MinLogBytes: -1}, 4096, 4096, true},
		{Rule{MinLogBytes: -1}, 4095, 4096, false},
		{Rule{MinLogBytes: -1}, 0, 0, false}, // an empty log never is
	} {
		if got := c.r.Due(c.logBytes, c.dbLen); got != c.due {
			t.Errorf("%+v.Due(%d, %d) = %v, want %v", c.r, c.logBytes, c.dbLen, got, c.due)
		}
	}
}

// TestSessionLog: the rule measures the batches past the newest snapshot
// only; covered batches awaiting deletion (or kept for retention) do not
// count.
func TestSessionLog(t *testing.T) {
	batch := func(last frames.Seq, size int64) restore.Object {
		return restore.Object{Kind: frames.KeyLog, Seq: last, Size: size}
	}
	s := &restore.Session{
		Epoch:     3,
		Snapshots: []restore.Object{{Kind: frames.KeySnapshot, Seq: 10}, {Kind: frames.KeySnapshot, Seq: 20}},
		Batches:   []restore.Object{batch(12, 100), batch(20, 200), batch(21, 1), batch(25, 40), batch(30, 1000)},
	}
	for _, c := range []struct {
		base    frames.Seq
		batches int
		bytes   int64
	}{
		{base: 20, batches: 3, bytes: 1041},
		{base: 10, batches: 5, bytes: 1341},
		{base: 30, batches: 0, bytes: 0},
	} {
		got, n := sessionLog(s, restore.Object{Seq: c.base})
		if len(got) != c.batches || n != c.bytes {
			t.Errorf("base %d: %d batches of %d bytes, want %d of %d", c.base, len(got), n, c.batches, c.bytes)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Seq <= got[i-1].Seq {
				t.Errorf("base %d: batches out of order: %d after %d", c.base, got[i].Seq, got[i-1].Seq)
			}
		}
	}
	if got := dbBytes(frames.Snapshot{Lanes: []frames.SnapshotLane{{Bytes: 4096}, {Bytes: 8192}}}); got != 12288 {
		t.Errorf("dbBytes of two lanes = %d, want 12288", got)
	}
}
