package fuzz

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// Mutating a whole object almost always breaks its seal, so the fuzzers
// above rarely reach the Cap'n Proto decoding behind it. The targets here
// fuzz the decompressed content instead and wrap it the way the writer does,
// built here from the layout documented in frames/gzip.go with the standard
// library (an independent implementation of that documentation).

// seal wraps content in a sealed gzip file.
func seal(t testing.TB, content []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // MTIME 0, XFL 0, OS 255: framectl's header
	zw.Write(content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	hash := xxhash.Sum64(buf.Bytes())
	buf.Write([]byte{0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 12, 0, 'F', 'C', 8, 0})
	buf.Write(binary.LittleEndian.AppendUint64(nil, hash))
	buf.Write([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	return buf.Bytes()
}

func unseal(f *testing.F, data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		f.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func TestSealMatchesWriter(t *testing.T) {
	// The independent implementation above must make files framectl
	// accepts, or the content fuzzers test nothing real. (Its DEFLATE bytes
	// differ from the writer's: another compressor.)
	for _, obj := range batchSeeds(t) {
		want, err := decodeBatch(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeBatch(seal(t, unsealT(t, obj)))
		if err != nil {
			t.Fatalf("framectl rejects a file sealed by the documented layout: %v", err)
		}
		if len(got) != len(want) || got[0].String() != want[0].String() {
			t.Fatalf("decoded %v, want %v", got, want)
		}
	}
}

func unsealT(t *testing.T, data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzBatchContent(f *testing.F) {
	for _, obj := range batchSeeds(f) {
		f.Add(unseal(f, obj))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		data := seal(t, content)
		var err error
		if alloc := allocatedBy(func() { _, err = decodeBatch(data) }); alloc > allocBound {
			t.Fatalf("decoding %d bytes of content allocated %d", len(content), alloc)
		}
		if err != nil {
			checkErr(t, err, batchKey)
		}
	})
}

func FuzzSnapshotContent(f *testing.F) {
	for _, obj := range snapshotSeeds(f) {
		f.Add(unseal(f, obj))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		data := seal(t, content)
		var err error
		if alloc := allocatedBy(func() { _, _, err = decodeSnapshot(data) }); alloc > allocBound {
			t.Fatalf("decoding %d bytes of content allocated %d", len(content), alloc)
		}
		if err != nil {
			checkErr(t, err, snapshotKey)
		}
	})
}
