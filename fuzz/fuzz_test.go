package fuzz

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/framectl/framectl/frames"
)

// Limits small enough that a violation shows up fast, large enough for the
// seeds. Allocation is checked against them.
var limits = frames.Limits{
	MaxMessageSize:   1 << 20,
	MaxBatchBytes:    4 << 20,
	MaxSnapshotBytes: 4 << 20,
	MaxManifestSize:  1 << 20,
	MaxChunkBytes:    1 << 20,
	MaxLanes:         64,
}

// allocBound is the most one decode may allocate in total: a small multiple
// of the decompressed-size limit (every decompressed byte is copied into at
// most a couple of buffers) plus fixed overhead for the inflater.
const allocBound = 4*(4<<20) + 2<<20

func allocatedBy(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// leastAllocatedBy is allocatedBy for a bound tight enough that noise
// matters: the least of three runs of f, which must be safe to repeat.
// runtime.MemStats counts the whole process, and the fuzzing engine's own
// goroutines allocate while f runs (a CI run once charged a 108-byte follow
// message with 5,944 bytes that reruns never repeat); noise only adds.
func leastAllocatedBy(f func()) uint64 {
	least := ^uint64(0)
	for range 3 {
		least = min(least, allocatedBy(f))
	}
	return least
}

// checkErr asserts what every decoder error must be: a *frames.Error naming
// the object, matching one sentinel.
func checkErr(t *testing.T, err error, key string) {
	t.Helper()
	var fe *frames.Error
	if !errors.As(err, &fe) || fe.Key != key {
		t.Fatalf("error %v (%T) does not name the object %q", err, err, key)
	}
	oneSentinel(t, err, frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind, frames.ErrInvalid)
}

// damageSentinels are the sentinels of damaged bytes: a decoder's error
// matches exactly one of them.
var damageSentinels = []error{frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind}

// oneSentinel fails the test unless err matches exactly one of sentinels:
// an error says what is wrong with the bytes, and says one thing.
func oneSentinel(t *testing.T, err error, sentinels ...error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v matches %d sentinels, want 1", err, n)
	}
}

func golden(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "frames", "testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batchSeeds returns real encoded batches: the golden file and a few more.
func batchSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{golden(t, "batch-v1.gz")}
	page := func(n uint32, b byte) frames.Page { return frames.Page{Number: n, Data: bytes.Repeat([]byte{b}, 512)} }
	for _, fs := range [][]frames.Frame{
		{{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: frames.KindInitialize}},
		{{Epoch: 2, FirstSeq: 5, LastSeq: 9, Kind: frames.KindSQLitePages, SQLite: frames.SQLitePages{
			PageSize: 512, DatabasePages: 3, After: 77, Pages: []frames.Page{page(1, 1), page(2, 2), page(3, 3)}}},
			{Epoch: 2, FirstSeq: 10, LastSeq: 10, Kind: frames.KindDeleteLane, Lane: 4}},
	} {
		var buf bytes.Buffer
		// Small parts, so seeds exercise continued frames.
		if _, err := frames.WriteBatch(&buf, fs[0].Epoch, fs, frames.WriteOptions{MaxPartBytes: 1024}); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

const batchKey = "fuzz-batch"

func decodeBatch(data []byte) ([]frames.Frame, error) {
	_, fs, err := frames.ReadBatch(bytes.NewReader(data), batchKey, limits)
	return fs, err
}

func FuzzBatch(f *testing.F) {
	for _, s := range batchSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fs []frames.Frame
		var err error
		if alloc := allocatedBy(func() { fs, err = decodeBatch(data) }); alloc > allocBound {
			t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			checkErr(t, err, batchKey)
			return
		}
		// Accepted: it must re-encode, and decode to the same frames.
		var buf bytes.Buffer
		if _, err := frames.WriteBatch(&buf, fs[0].Epoch, fs, frames.WriteOptions{}); err != nil {
			t.Fatalf("accepted batch does not re-encode: %v", err)
		}
		again, err := decodeBatch(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if len(again) != len(fs) {
			t.Fatalf("%d frames became %d", len(fs), len(again))
		}
		for i := range fs {
			if fs[i].String() != again[i].String() {
				t.Fatalf("frame %d: %v became %v", i, &fs[i], &again[i])
			}
		}
	})
}

const snapshotKey = "fuzz-snapshot"

func decodeSnapshot(data []byte) (frames.Snapshot, [][]byte, error) {
	sr, err := frames.NewSnapshotReader(bytes.NewReader(data), snapshotKey, limits)
	if err != nil {
		return frames.Snapshot{}, nil, err
	}
	var lanes [][]byte
	for {
		_, r, err := sr.NextLane()
		if err == io.EOF {
			return sr.Header(), lanes, nil
		}
		if err != nil {
			return frames.Snapshot{}, nil, err
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return frames.Snapshot{}, nil, err
		}
		lanes = append(lanes, b)
	}
}

// snapshotSeeds returns real encoded snapshots.
func snapshotSeeds(t testing.TB) [][]byte {
	lane := bytes.Repeat([]byte{1, 2, 3, 4}, 256)
	sum, _, _ := frames.DatabaseChecksum(bytes.NewReader(lane), 512)
	var buf bytes.Buffer
	sw, err := frames.NewSnapshotWriter(&buf, frames.Snapshot{Epoch: 9, Seq: 3, Lanes: []frames.SnapshotLane{
		{Lane: 0, Kind: frames.LaneSQLitePages, PageSize: 512, Bytes: 1024, Checksum: sum},
		{Lane: 5, Kind: frames.LaneSQLitePages, PageSize: 4096},
	}}, frames.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw.Write(lane)
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	return [][]byte{golden(t, "snapshot-v1.gz"), buf.Bytes()}
}

func FuzzSnapshot(f *testing.F) {
	for _, s := range snapshotSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var hdr frames.Snapshot
		var lanes [][]byte
		var err error
		if alloc := allocatedBy(func() { hdr, lanes, err = decodeSnapshot(data) }); alloc > allocBound {
			t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			checkErr(t, err, snapshotKey)
			return
		}
		// Accepted: every lane has its declared length and checksum.
		for i, l := range hdr.Lanes {
			if uint64(len(lanes[i])) != l.Bytes {
				t.Fatalf("lane %d: %d bytes, header says %d", l.Lane, len(lanes[i]), l.Bytes)
			}
			c, _, err := frames.DatabaseChecksum(bytes.NewReader(lanes[i]), int(l.PageSize))
			if err != nil || c != l.Checksum {
				t.Fatalf("lane %d accepted with checksum %s, header says %s (%v)", l.Lane, c, l.Checksum, err)
			}
		}
	})
}

func FuzzParseKey(f *testing.F) {
	a := frames.Actor{Namespace: frames.NamespaceID("", "fuzz"), Actor: frames.ActorKey([]byte{1, 2, 3})}
	for _, k := range []string{a.OwnKey(), a.LogKey(3, 256), a.SnapshotKey(1<<63, 0), a.ChunkKey(frames.SumChunk(nil)), frames.NodeKey("node-1"), a.AlarmKey(1_700_000_000_000, 7), "do/x", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := frames.ParseKey(s)
		if err != nil {
			if !errors.Is(err, frames.ErrInvalid) {
				t.Fatalf("ParseKey(%q): %v does not match ErrInvalid", s, err)
			}
			return
		}
		// Only canonical keys parse: re-encoding gives the input back.
		if k.String() != s {
			t.Fatalf("ParseKey(%q) re-encodes as %q", s, k.String())
		}
	})
}

// FuzzParseNumber: the number parsers accept only what their encoders
// produce (keys' Asc and Desc, Seq's decimal, Checksum's hex).
func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"00", "0f", "110", "2100", "fffffffffffffffff", "ff", "ef", "", "0",
		"18446744073709551615", "18446744073709551616", "007", "1122334455667788", "112233445566778G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := frames.ParseSeq(s); err == nil {
			if n.String() != s {
				t.Fatalf("ParseSeq(%q) = %d, which prints as %q", s, n, n.String())
			}
		} else if !errors.Is(err, frames.ErrInvalid) {
			t.Fatalf("ParseSeq(%q): %v", s, err)
		}
		if c, err := frames.ParseChecksum(s); err == nil {
			if c.String() != s {
				t.Fatalf("ParseChecksum(%q) = %#x, which prints as %q", s, uint64(c), c.String())
			}
		} else if !errors.Is(err, frames.ErrInvalid) {
			t.Fatalf("ParseChecksum(%q): %v", s, err)
		}
		if n, err := frames.ParseAsc(s); err == nil {
			if frames.Asc(n) != s {
				t.Fatalf("ParseAsc(%q) = %d, which encodes as %q", s, n, frames.Asc(n))
			}
		} else if !errors.Is(err, frames.ErrInvalid) {
			t.Fatalf("ParseAsc(%q): %v", s, err)
		}
		if n, err := frames.ParseDesc(s); err == nil {
			if frames.Desc(n) != s {
				t.Fatalf("ParseDesc(%q) = %d, which encodes as %q", s, n, frames.Desc(n))
			}
		} else if !errors.Is(err, frames.ErrInvalid) {
			t.Fatalf("ParseDesc(%q): %v", s, err)
		}
	})
}
