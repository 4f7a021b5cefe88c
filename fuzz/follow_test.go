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
	for _, name := range []string{"fence", "promise", "append", "ack", "refuse"} {
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
	n := 0
	for _, s := range []error{frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v matches %d sentinels, want 1", err, n)
	}
}

func decodeFollow(t *testing.T, data []byte) follow.Message {
	t.Helper()
	var m follow.Message
	var err error
	if alloc := allocatedBy(func() { m, err = follow.DecodeMessage(data, followPeer, followLimits) }); alloc > uint64(4*len(data))+4096 {
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
// a follower promises whatever it is sent: it holds one chain, within its
// bound; its promise never goes back and covers its log's epoch; within
// an epoch its log never gets shorter; and its reply is a valid message.
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
			reply := fl.Handle(m)
			st := fl.State()
			switch {
			case fl.Bytes() > followLimits.MaxTailBytes:
				t.Fatalf("holds %d bytes, past %d", fl.Bytes(), followLimits.MaxTailBytes)
			case st.Promised < prev.Promised || st.LogEpoch > st.Promised:
				t.Fatalf("promise %d -> %d, log epoch %d", prev.Promised, st.Promised, st.LogEpoch)
			case st.LogEpoch == prev.LogEpoch && st.End().Seq < prev.End().Seq:
				t.Fatalf("log of epoch %d shrank from %d to %d", st.LogEpoch, prev.End().Seq, st.End().Seq)
			}
			if _, err := follow.OpenFollower(st, followLimits); err != nil {
				t.Fatalf("its state does not reopen: %v", err)
			}
			if reply != nil {
				if _, err := follow.AppendMessage(nil, reply, followLimits); err != nil {
					t.Fatalf("reply %T to %T does not encode: %v", reply, m, err)
				}
			}
			prev = st
		}
	})
}
