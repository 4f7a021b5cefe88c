package follow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/framectl/framectl/frames"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the encoder")

// goldenMessages are one message of every kind; their encodings are pinned
// in testdata/golden/<name>.bin.
func goldenMessages() map[string]Message {
	base := Point{Seq: 41, Chain: 0x1122334455667788}
	es := []Entry{
		{Seq: 42, Before: base.Chain, After: 0x0102030405060708, Body: []byte("commit 42")},
		{Seq: 43, Before: 0x0102030405060708, After: 0xa1a2a3a4a5a6a7a8},
	}
	return map[string]Message{
		"fence": &Fence{Epoch: 7},
		// Version 2: the actor as the bucket names it.
		"fence-actor":  &Fence{Epoch: 7, Actor: "Zm9sbG93IHRoZSBvd25lcg/0a1b"},
		"append-actor": &Append{Epoch: 7, Reset: true, Prev: base, Durable: base, Entries: es, Actor: "Zm9sbG93IHRoZSBvd25lcg/0a1b"},
		"promise":      &Promise{Epoch: 7, LogEpoch: 6, Base: base, Entries: es},
		"append":       &Append{Epoch: 7, Reset: true, Prev: base, Durable: base, Entries: es},
		"ack":          &Ack{Epoch: 7, End: es[1].Point()},
		"refuse":       &Refuse{Epoch: 6, Reason: RefuseStale, Newest: 7, End: base},
	}
}

func TestWireGolden(t *testing.T) {
	for name, m := range goldenMessages() {
		got, err := AppendMessage(nil, m, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", name+".bin")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encodes as\n%x\nthe golden file holds\n%x", name, got, want)
		}
		back, err := DecodeMessage(want, "golden", Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(back, m) {
			t.Errorf("%s: decodes as %#v, want %#v", name, back, m)
		}
	}
}

// The layout drawn in doc.go, byte by byte, for one Append.
func TestWireLayout(t *testing.T) {
	m := &Append{Epoch: 3, Prev: Point{1, 2}, Durable: Point{0, 0}, Entries: []Entry{{Seq: 2, Before: 2, After: 9, Body: []byte{0xee}}}}
	got, err := AppendMessage(nil, m, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	want := []byte{1, kindAppend}
	want = le.AppendUint64(want, 3)
	want = append(want, 0)
	want = le.AppendUint64(le.AppendUint64(want, 1), 2)
	want = le.AppendUint64(le.AppendUint64(want, 0), 0)
	want = le.AppendUint32(want, 1)
	want = le.AppendUint64(le.AppendUint64(le.AppendUint64(want, 2), 2), 9)
	want = append(le.AppendUint32(want, 1), 0xee)
	want = le.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	if len(got)-len(m.Entries[0].Body)-entryHeaderBytes > maxFixedBytes {
		t.Fatalf("an Append's fixed fields take %d bytes, past maxFixedBytes", len(got)-1-entryHeaderBytes)
	}
}

// decodeErr asserts what every decoding error is: a *MessageError naming
// the peer, matching exactly the sentinel given.
func decodeErr(t *testing.T, data []byte, lim Limits, want error) {
	t.Helper()
	m, err := DecodeMessage(data, "peer-1", lim)
	var me *MessageError
	if err == nil || !errors.As(err, &me) || me.From != "peer-1" {
		t.Fatalf("decoded %x as %v, %v", data, m, err)
	}
	n := 0
	for _, s := range []error{frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 || !errors.Is(err, want) {
		t.Fatalf("%v: want exactly %v", err, want)
	}
}

func withCRC(b []byte) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestDecodeRejects(t *testing.T) {
	good, err := AppendMessage(nil, goldenMessages()["promise"], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Every prefix fails, as truncated or (once the CRC is missing) corrupt.
	for i := range len(good) {
		if _, err := DecodeMessage(good[:i], "peer-1", Limits{}); err == nil {
			t.Fatalf("a prefix of %d bytes decoded", i)
		}
	}
	decodeErr(t, good[:3], Limits{}, frames.ErrTruncated)
	flipped := bytes.Clone(good)
	flipped[12] ^= 1
	decodeErr(t, flipped, Limits{}, frames.ErrCorrupt)

	at := func(off int, v byte) []byte { b := bytes.Clone(good); b[off] = v; return withCRC(b) }
	decodeErr(t, at(0, 2), Limits{}, frames.ErrUnknownKind)
	decodeErr(t, at(1, 9), Limits{}, frames.ErrUnknownKind)
	decodeErr(t, withCRC(append(bytes.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0)), Limits{}, frames.ErrCorrupt)
	large, err := AppendMessage(nil, &Promise{Epoch: 7, Entries: []Entry{{Seq: 1, Body: make([]byte, 2*maxFixedBytes)}}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	decodeErr(t, large, Limits{MaxTailBytes: int64(len(large)) - maxFixedBytes - 1}, frames.ErrTooLarge)

	// An entry count no bytes could hold fails before the list is made:
	// 2^32-1 entries would be 200 GB of Entry values.
	countAt := 2 + 8 + 8 + 16
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(huge[countAt:], 0xffffffff)
	decodeErr(t, withCRC(huge), Limits{}, frames.ErrTruncated)
	// A body length past the end.
	body := bytes.Clone(good)
	binary.LittleEndian.PutUint32(body[countAt+4+24:], 1<<30)
	decodeErr(t, withCRC(body), Limits{}, frames.ErrTruncated)

	// Field rules: epoch 0, log epoch past the promise, entries not chained,
	// unknown reason, unknown flags, a stale refusal naming no newer epoch.
	decodeErr(t, withCRC(binary.LittleEndian.AppendUint32([]byte{1, kindFence, 0, 0, 0, 0, 0, 0, 0, 0}, 0)), Limits{}, frames.ErrCorrupt)
	decodeErr(t, at(2+8, 8), Limits{}, frames.ErrCorrupt)
	decodeErr(t, at(countAt+4, 44), Limits{}, frames.ErrCorrupt)
	refuse, _ := AppendMessage(nil, goldenMessages()["refuse"], Limits{})
	r := bytes.Clone(refuse)
	r[10] = 7
	decodeErr(t, withCRC(r), Limits{}, frames.ErrUnknownKind)
	r = bytes.Clone(refuse)
	r[11] = 5 // newest 5, not past epoch 6
	decodeErr(t, withCRC(r), Limits{}, frames.ErrCorrupt)
	app, _ := AppendMessage(nil, goldenMessages()["append"], Limits{})
	a := bytes.Clone(app)
	a[10] = 3
	decodeErr(t, withCRC(a), Limits{}, frames.ErrCorrupt)
}

// Version 2 is a Fence's or an Append's with an actor, and only that:
// version 1 still decodes (the records of package tails' stores), and
// the actor's length is checked before its bytes are read.
func TestDecodeActor(t *testing.T) {
	fence, _ := AppendMessage(nil, goldenMessages()["fence-actor"], Limits{})
	if fence[0] != wireVersionActor {
		t.Fatalf("a Fence with an actor encodes as version %d", fence[0])
	}
	if plain, _ := AppendMessage(nil, &Fence{Epoch: 7}, Limits{}); plain[0] != wireVersion {
		t.Fatalf("a Fence without an actor encodes as version %d", plain[0])
	}
	lengthAt := 2 + 8
	withLength := func(n uint16) []byte {
		b := bytes.Clone(fence[:len(fence)-4])
		binary.LittleEndian.PutUint16(b[lengthAt:], n)
		return withCRC(b)
	}
	decodeErr(t, withLength(0), Limits{}, frames.ErrCorrupt)
	decodeErr(t, withLength(MaxBucketActorBytes+1), Limits{}, frames.ErrCorrupt)
	decodeErr(t, withLength(uint16(len(fence))), Limits{}, frames.ErrTruncated)
	// Version 2 of a kind that carries no actor.
	ack, _ := AppendMessage(nil, goldenMessages()["ack"], Limits{})
	v2 := bytes.Clone(ack[:len(ack)-4])
	v2[0] = wireVersionActor
	decodeErr(t, withCRC(v2), Limits{}, frames.ErrUnknownKind)
	// Version 1 with an actor's bytes after the epoch: bytes past the end.
	v1 := bytes.Clone(fence[:len(fence)-4])
	v1[0] = wireVersion
	decodeErr(t, withCRC(v1), Limits{}, frames.ErrCorrupt)
	if _, err := AppendMessage(nil, &Fence{Epoch: 1, Actor: string(make([]byte, MaxBucketActorBytes+1))}, Limits{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an actor past the bound: AppendMessage: %v, want ErrInvalid", err)
	}
}

// Decoded bodies are copies: the buffer can be reused at once.
func TestDecodeCopies(t *testing.T) {
	data, _ := AppendMessage(nil, goldenMessages()["append"], Limits{})
	m, err := DecodeMessage(data, "peer-1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	clear(data)
	if got := string(m.(*Append).Entries[0].Body); got != "commit 42" {
		t.Fatalf("body %q after the buffer was cleared", got)
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	es := entries(Point{}, 2, 1)
	es[1].Before ^= 1
	for name, m := range map[string]Message{
		"epoch 0":             &Ack{},
		"unchained":           &Append{Epoch: 1, Entries: es},
		"log past promise":    &Promise{Epoch: 1, LogEpoch: 2},
		"unknown reason":      &Refuse{Epoch: 1, Reason: 9, Newest: 1},
		"stale, not newer":    &Refuse{Epoch: 2, Reason: RefuseStale, Newest: 2},
		"larger than allowed": &Append{Epoch: 1, Entries: entries(Point{}, 40, 1)},
		"no message":          nil,
	} {
		lim := Limits{}
		if name == "larger than allowed" {
			lim.MaxTailBytes = 100
		}
		if _, err := AppendMessage(nil, m, lim); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: AppendMessage: %v, want ErrInvalid", name, err)
		}
	}
}
