package fuzz

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// A FuzzRestore input is a program of mutations over the clean bucket's
// objects, one after another, read from the input's bytes:
//
//	op      arguments                      effect
//	flip    object, offset (2), xor        one byte XORed (0 means 0xff)
//	cut     object, length (2)             truncated to length mod its size
//	drop    object                         deleted
//	copy    object, key                    its bytes stored under key too
//	swap    object, object                 their bytes exchanged
//	garbage key, length, bytes             length mod 64 bytes of the input
//	                                       stored under key
//	reseal  object, offset (2), xor        one byte of the decompressed
//	                                       content XORed, the object
//	                                       compressed and sealed again the
//	                                       way the writer seals it
//	target  seq                            restore to ToSeq(seq mod
//	                                       latest+2) instead of Latest
//
// An object is an index (mod their number) into the keys present, sorted;
// a key is an index into keyspace. Numbers of two bytes are big-endian.
// Mutations past maxMutations, and an input that ends mid-mutation, are
// ignored.

const (
	opFlip = iota
	opCut
	opDrop
	opCopy
	opSwap
	opGarbage
	opReseal
	opTarget
	opCount
)

const maxMutations = 8

// damaged is the bucket a program leaves.
type damaged struct {
	objects map[string][]byte
	// sealed holds every object a reseal made, by its bytes: a valid seal
	// over content a mutation changed, which the seal cannot tell from
	// what the writer made (only the checks behind it can). By bytes, not
	// by key, because later mutations may move the bytes (copy, swap) or
	// restore them (the same flip twice).
	sealed map[string]bool
	// target is ToSeq(seq) when toSeq is set, else Latest.
	target restore.Target
	seq    frames.Seq
	toSeq  bool
}

// keyspace is every key a mutation may write: own.json, batch and snapshot
// keys of sessions 1 to 3 at frames 0 to latest+1 (the clean bucket's keys
// among them, and their neighbours, which restore must not take for
// them), and keys under the actor that framectl does not write.
func (h *history) keyspace() []string {
	a := h.actor
	keys := []string{a.OwnKey(), a.LogSessionPrefix(2) + "stray", a.SnapshotSessionPrefix(2) + "stray"}
	for s := frames.Epoch(1); s <= 3; s++ {
		for n := frames.Seq(0); n <= h.latest+1; n++ {
			keys = append(keys, a.LogKey(s, n), a.SnapshotKey(s, n))
		}
	}
	return keys
}

// mutate runs the program in on a copy of the clean bucket.
func (h *history) mutate(t testing.TB, in []byte) damaged {
	d := damaged{objects: maps.Clone(h.data), sealed: map[string]bool{}, target: restore.Latest()}
	keyspace := h.keyspace()
	r := bytes.NewReader(in)
	next := func() (int, bool) {
		b, err := r.ReadByte()
		return int(b), err == nil
	}
	next16 := func() (int, bool) {
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, false
		}
		return int(binary.BigEndian.Uint16(b[:])), true
	}
	object := func() (string, bool) {
		i, ok := next()
		if !ok || len(d.objects) == 0 {
			return "", false
		}
		keys := slices.Sorted(maps.Keys(d.objects))
		return keys[i%len(keys)], true
	}
	key := func() (string, bool) {
		i, ok := next()
		return keyspace[i%len(keyspace)], ok
	}
	store := func(k string, data []byte) { d.objects[k] = data }
	for range maxMutations {
		op, ok := next()
		if !ok {
			break
		}
		switch op % opCount {
		case opFlip:
			k, ok1 := object()
			off, ok2 := next16()
			x, ok3 := next()
			if !ok1 || !ok2 || !ok3 || len(d.objects[k]) == 0 {
				return d
			}
			data := bytes.Clone(d.objects[k])
			data[off%len(data)] ^= byte(cmpOr(x, 0xff))
			store(k, data)
		case opCut:
			k, ok1 := object()
			n, ok2 := next16()
			if !ok1 || !ok2 || len(d.objects[k]) == 0 {
				return d
			}
			store(k, d.objects[k][:n%len(d.objects[k])])
		case opDrop:
			k, ok := object()
			if !ok {
				return d
			}
			delete(d.objects, k)
		case opCopy:
			k, ok1 := object()
			dst, ok2 := key()
			if !ok1 || !ok2 {
				return d
			}
			store(dst, d.objects[k])
		case opSwap:
			k1, ok1 := object()
			k2, ok2 := object()
			if !ok1 || !ok2 {
				return d
			}
			data1, data2 := d.objects[k1], d.objects[k2]
			store(k1, data2)
			store(k2, data1)
		case opGarbage:
			dst, ok1 := key()
			n, ok2 := next()
			if !ok1 || !ok2 {
				return d
			}
			data := make([]byte, n%64)
			m, _ := io.ReadFull(r, data)
			store(dst, data[:m])
		case opReseal:
			k, ok1 := object()
			off, ok2 := next16()
			x, ok3 := next()
			if !ok1 || !ok2 || !ok3 {
				return d
			}
			content, err := gunzip(d.objects[k])
			if err != nil || len(content) == 0 {
				continue // not a gzip file (own.json, or damaged already)
			}
			content[off%len(content)] ^= byte(cmpOr(x, 0xff))
			sealed := seal(t, content)
			d.sealed[string(sealed)] = true
			store(k, sealed)
		case opTarget:
			n, ok := next()
			if !ok {
				return d
			}
			d.seq, d.toSeq = frames.Seq(n)%(h.latest+2), true
			d.target = restore.ToSeq(d.seq)
		}
	}
	return d
}

func cmpOr(x, otherwise int) int {
	if x == 0 {
		return otherwise
	}
	return x
}

// gunzip returns an object's decompressed content (both members; the seal
// member is empty).
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// intact reports whether every object of the clean bucket is present with
// its bytes, and none is added.
func (d *damaged) intact(h *history) bool {
	return maps.EqualFunc(d.objects, h.data, bytes.Equal)
}

// nothingLost reports whether every object of the clean bucket is present
// with its bytes (objects may have been added).
func (d *damaged) nothingLost(h *history) bool {
	for k, data := range h.data {
		if got, ok := d.objects[k]; !ok || !bytes.Equal(got, data) {
			return false
		}
	}
	return true
}

// recordsEnd reports whether own.json is present with its bytes: it then
// says where the current session ended (fence.Record.Seq), and a restore
// may not return an older state without an error. Without it the end is
// unknowable, as after a crash.
func (d *damaged) recordsEnd(h *history) bool {
	k := h.actor.OwnKey()
	got, ok := d.objects[k]
	return ok && bytes.Equal(got, h.data[k])
}

// visiblyDamaged returns the keys framectl writes whose bytes differ from
// the clean bucket's and are not a valid seal: flipped, cut, garbage, or
// another object's bytes under the wrong key. Verification must name
// every one. own.json carries no seal: changed bytes that still parse as
// a record (a digit of its epoch flipped) are a state the writers could
// have left, and verification can judge it only against the objects; the
// restore properties still hold for it.
func (d *damaged) visiblyDamaged(h *history) []string {
	var keys []string
	for k, data := range d.objects {
		if clean, ok := h.data[k]; d.sealed[string(data)] || ok && bytes.Equal(data, clean) {
			continue
		}
		pk, err := frames.ParseKey(k)
		if err != nil || (pk.Kind != frames.KeyLog && pk.Kind != frames.KeySnapshot && pk.Kind != frames.KeyOwn) {
			continue
		}
		if pk.Kind == frames.KeyOwn {
			if _, err := fence.ParseRecord(k, data); err == nil {
				continue
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// past returns an object of epoch's session in the bucket at a sequence
// number after from and at or before to: a batch ending there or a
// snapshot taken there.
func (d *damaged) past(epoch frames.Epoch, from, to frames.Seq) (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(d.objects)) {
		pk, err := frames.ParseKey(k)
		if err == nil && pk.Epoch == epoch && (pk.Kind == frames.KeyLog || pk.Kind == frames.KeySnapshot) &&
			pk.Seq > from && pk.Seq <= to {
			return k, true
		}
	}
	return "", false
}
