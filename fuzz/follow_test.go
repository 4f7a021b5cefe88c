package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// What followers send and store is untrusted input like bucket data: any
// bytes either decode to a message that encodes back to exactly those bytes,
// or fail with a *follow.MessageError naming the peer and matching one
// sentinel, allocating no more than a small multiple of their length.

// followLimits keep messages small enough that a violation of the bounds
// shows.
var followLimits = follow.Limits{MaxTailBytes: 64 << 10}

const followPeer = "fuzz-peer"

func followSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"fence", "promise", "append", "ack", "refuse", "fence-actor", "append-actor"} {
		b, err := os.ReadFile(filepath.Join("..", "follow", "testdata", "golden", name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// withCRC returns b with its last four bytes set to the CRC-32C of the
// others, so the fuzzer explores the fields rather than the checksum.
func withCRC(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func checkFollowErr(t *testing.T, err error) {
	t.Helper()
	var me *follow.MessageError
	if !errors.As(err, &me) || me.From != followPeer {
		t.Fatalf("error %v (%T) does not name the peer %q", err, err, followPeer)
	}
	oneSentinel(t, err, damageSentinels...)
}

func decodeFollow(t *testing.T, data []byte) follow.Message {
	t.Helper()
	var m follow.Message
	var err error
	if alloc := leastAllocatedBy(func() { m, err = follow.DecodeMessage(data, followPeer, followLimits) }); alloc > uint64(4*len(data))+4096 {
		t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
	}
	if err != nil {
		checkFollowErr(t, err)
		return nil
	}
	again, err := follow.AppendMessage(nil, m, followLimits)
	if err != nil {
		t.Fatalf("accepted %T does not encode: %v", m, err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("accepted\n%x\nencodes as\n%x", data, again)
	}
	return m
}

func FuzzFollowMessage(f *testing.F) {
	for _, s := range followSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeFollow(t, data)
		decodeFollow(t, withCRC(data))
	})
}

// FuzzFollower feeds a follower any sequence of messages (each a two-byte
// length and the message, its CRC fixed up) and checks, after each, what
// a follower promises whatever it is sent (checkFollowerStep).
func FuzzFollower(f *testing.F) {
	seeds := followSeeds(f)
	var all []byte
	for _, s := range seeds {
		all = binary.BigEndian.AppendUint16(all, uint16(len(s)))
		all = append(all, s...)
		f.Add(all)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fl := follow.NewFollower(followLimits)
		var prev follow.State
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				return
			}
			m, err := follow.DecodeMessage(withCRC(data[:n]), followPeer, followLimits)
			data = data[n:]
			if err != nil {
				continue
			}
			prev = checkFollowerStep(t, fl, followLimits, prev, m)
		}
	})
}

// checkFollowerStep hands m to fl and checks what a follower promises
// whatever it is sent: it holds one chain, within its bound; its promise
// never goes back and covers its log's epoch; within an epoch its log never
// gets shorter nor changes a point it held; its state reopens; its reply is
// a valid message that reports its end.
func checkFollowerStep(t *testing.T, fl *follow.Follower, lim follow.Limits, prev follow.State, m follow.Message) follow.State {
	t.Helper()
	reply := fl.Handle(m)
	st := fl.State()
	switch {
	case fl.Bytes() > lim.MaxTailBytes:
		t.Fatalf("holds %d bytes, past %d", fl.Bytes(), lim.MaxTailBytes)
	case st.Promised < prev.Promised || st.LogEpoch > st.Promised:
		t.Fatalf("promise %d -> %d, log epoch %d", prev.Promised, st.Promised, st.LogEpoch)
	case st.LogEpoch == prev.LogEpoch && st.End().Seq < prev.End().Seq:
		t.Fatalf("log of epoch %d shrank from %d to %d", st.LogEpoch, prev.End().Seq, st.End().Seq)
	case st.Promised > prev.Promised && !raises(m):
		// quorum checks a raise against the bucket for these two kinds
		// only (quorum/admit.go).
		t.Fatalf("a %T raised the promise from %d to %d: only a Fence or a reset may", m, prev.Promised, st.Promised)
	}
	if st.LogEpoch == prev.LogEpoch {
		for _, e := range prev.Entries {
			if c, ok := pointOf(st, e.Seq); ok && c != e.After {
				t.Fatalf("log of epoch %d changed seq %d", st.LogEpoch, e.Seq)
			}
		}
	}
	if _, err := follow.OpenFollower(st, lim); err != nil {
		t.Fatalf("its state does not reopen: %v", err)
	}
	if reply != nil {
		if _, err := follow.AppendMessage(nil, reply, lim); err != nil {
			t.Fatalf("reply %T to %T does not encode: %v", reply, m, err)
		}
		var end follow.Point
		switch r := reply.(type) {
		case *follow.Ack:
			end = r.End
		case *follow.Refuse:
			end = r.End
		case *follow.Promise:
			end = endOf(r.Base, r.Entries)
		}
		if end != st.End() {
			t.Fatalf("reply %T reports end %d, the follower holds through %d", reply, end.Seq, st.End().Seq)
		}
	}
	return st
}

func raises(m follow.Message) bool {
	switch m := m.(type) {
	case *follow.Fence:
		return true
	case *follow.Append:
		return m.Reset
	}
	return false
}

func endOf(base follow.Point, es []follow.Entry) follow.Point {
	if len(es) == 0 {
		return base
	}
	return es[len(es)-1].Point()
}

// pointOf is the chain value st holds at seq.
func pointOf(st follow.State, seq frames.Seq) (frames.Checksum, bool) {
	if seq == st.Base.Seq {
		return st.Base.Chain, true
	}
	for _, e := range st.Entries {
		if e.Seq == seq {
			return e.After, true
		}
	}
	return 0, false
}

// FuzzFollowerOps drives a follower with messages built from the input,
// four bytes each, that are mostly well formed (random bytes rarely chain):
// a kind (fence, append, reset), an epoch of 1 to 4, a start near the log's
// end, up to 7 entries on one of three branches of history (the same
// branch agrees with itself, two branches differ past where they part),
// and a durable point. The checks are FuzzFollower's, with a bound small
// enough to be reached.
func FuzzFollowerOps(f *testing.F) {
	f.Add([]byte{2, 1, 3, 0, 1, 1, 3, 2, 0, 2, 0, 0, 1, 2, 2, 1, 1, 1, 5, 3})
	f.Add([]byte{2, 2, 4, 0, 0, 3, 0, 0, 1, 2, 5, 9, 2, 3, 2, 1, 1, 2, 6, 0})
	// A bound of a few entries, so that full refusals happen.
	lim := follow.Limits{MaxTailBytes: 2000}
	f.Fuzz(func(t *testing.T, data []byte) {
		fl := follow.NewFollower(lim)
		var prev follow.State
		for ; len(data) >= 4; data = data[4:] {
			epoch := frames.Epoch(data[1]%4) + 1
			end := prev.End().Seq
			start := frames.Seq(0)
			if d := frames.Seq(data[2] % 16); end+4 >= d {
				start = end + 4 - d
			}
			branch := data[3] % 3
			var m follow.Message
			switch data[0] % 3 {
			case 0:
				m = &follow.Fence{Epoch: epoch}
			default:
				es := branchEntries(start, int(data[2]>>4)%8, branch)
				durable := branchPoint(start+frames.Seq(data[3]>>2%8), branch)
				m = &follow.Append{Epoch: epoch, Reset: data[0]%3 == 2, Prev: branchPoint(start, branch), Durable: durable, Entries: es}
			}
			prev = checkFollowerStep(t, fl, lim, prev, m)
		}
	})
}

// branchPoint and branchEntries give history branch b: branches 0, 1 and 2
// agree through seq 3, then each has its own chain values.
func branchPoint(seq frames.Seq, b byte) follow.Point {
	if seq <= 3 {
		b = 0
	}
	return follow.Point{Seq: seq, Chain: frames.Checksum(uint64(seq)*0x9e3779b97f4a7c15 + uint64(b)*0xbf58476d1ce4e5b9)}
}

func branchEntries(start frames.Seq, n int, b byte) []follow.Entry {
	var es []follow.Entry
	for i := range n {
		seq := start + frames.Seq(i) + 1
		es = append(es, follow.Entry{Seq: seq, Before: branchPoint(seq-1, b).Chain, After: branchPoint(seq, b).Chain, Body: make([]byte, int(seq%5)*100)})
	}
	return es
}
