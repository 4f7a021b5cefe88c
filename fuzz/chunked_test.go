package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/framectl/framectl/frames"
)

var fuzzActor = frames.Actor{Namespace: frames.NamespaceID("", "fuzz"), Actor: frames.ActorKey([]byte{1, 2, 3})}

// chunkSeeds returns real chunk objects: the golden one and a few more.
func chunkSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{golden(t, "chunk-v1.gz")}
	random := make([]byte, 8192)
	x := uint32(1)
	for i := range random {
		x = x*1664525 + 1013904223
		random[i] = byte(x >> 24)
	}
	for _, content := range [][]byte{make([]byte, 512), bytes.Repeat([]byte{1, 2, 3, 4}, 1024), random} {
		var buf bytes.Buffer
		if _, _, err := frames.WriteChunk(&buf, content, frames.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

const chunkKey = "fuzz-chunk"

func readChunk(data []byte, key string, size uint64) (frames.ChunkHeader, []byte, error) {
	return frames.ReadChunk(bytes.NewReader(data), key, size, nil, limits)
}

func FuzzReadChunk(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkChunkObject)
}

// FuzzReadChunkContent fuzzes what is inside the seal of a gzip chunk file
// (content_test.go): the format framectl wrote before zstd chunk files.
// The zstd seeds' header messages and content seed it too: version 2 in a
// gzip file is refused, one mutation from version 1.
func FuzzReadChunkContent(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		if s[0] == 0x1f {
			f.Add(unseal(f, s))
		} else {
			hdr, _ := splitZstdChunk(f, s)
			_, content, err := readChunk(s, chunkKey, 0)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(append(bytes.Clone(hdr), content...))
		}
	}
	f.Fuzz(func(t *testing.T, content []byte) { checkChunkObject(t, seal(t, content)) })
}

// FuzzReadZstdChunkContent fuzzes what is inside the seal of a zstd chunk
// file: the header message and the zstd frame, sealed as the writer seals
// them, so that mutations reach the decoder instead of the seal.
func FuzzReadZstdChunkContent(f *testing.F) {
	for _, s := range chunkSeeds(f) {
		if s[0] != 0x1f {
			hdr, frame := splitZstdChunk(f, s)
			f.Add(hdr, frame)
		}
	}
	f.Fuzz(func(t *testing.T, hdr, frame []byte) { checkChunkObject(t, zstdFile(hdr, frame)) })
}

// splitZstdChunk returns the header message and the zstd frame of a zstd
// chunk file (frames' doc.go, "Chunk files").
func splitZstdChunk(t testing.TB, data []byte) (hdr, frame []byte) {
	n := int(binary.LittleEndian.Uint32(data[4:]))
	if len(data) < 8+n+18 {
		t.Fatalf("zstd chunk seed of %d bytes", len(data))
	}
	return data[8 : 8+n], data[8+n : len(data)-18]
}

// zstdFile seals a header message and a frame as a zstd chunk file: an
// implementation of the format apart from the writer's, checked against
// it by TestChunkedSeedsResealed.
func zstdFile(hdr, frame []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	b = append(append(b, hdr...), frame...)
	sum := xxhash.Sum64(b)
	b = binary.LittleEndian.AppendUint32(b, 0x184D2A5F)
	b = binary.LittleEndian.AppendUint32(b, 10)
	b = append(b, 'F', 'C')
	return binary.LittleEndian.AppendUint64(b, sum)
}

// checkChunkObject checks ReadChunk's promises on one object: bounded
// allocation, an error naming the key and matching one sentinel, and, when
// it accepts, content that is what the header and the key say.
func checkChunkObject(t *testing.T, data []byte) {
	var h frames.ChunkHeader
	var content []byte
	var err error
	if alloc := allocatedBy(func() { h, content, err = readChunk(data, chunkKey, 0) }); alloc > allocBound {
		t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
	}
	if err != nil {
		checkErr(t, err, chunkKey)
		return
	}
	// Accepted: the content is what the header declares, and its hash.
	if uint64(len(content)) != h.Bytes || frames.SumChunk(content) != h.Hash {
		t.Fatalf("accepted %d bytes with hash %s, header declares %d bytes, hash %s", len(content), frames.SumChunk(content), h.Bytes, h.Hash)
	}
	// Under its own key it is accepted; under another chunk's key, or
	// with another size expected, refused naming the key.
	key := fuzzActor.ChunkKey(h.Hash)
	if _, _, err := readChunk(data, key, h.Bytes); err != nil {
		t.Fatalf("refused under its own key: %v", err)
	}
	other := h.Hash
	other[0] ^= 1
	okey := fuzzActor.ChunkKey(other)
	_, _, err = readChunk(data, okey, 0)
	var mm *frames.KeyMismatchError
	if !errors.As(err, &mm) || mm.Chunk != h.Hash {
		t.Fatalf("accepted under another chunk's key, or refused otherwise: %v", err)
	}
	checkErr(t, err, okey)
	_, _, err = readChunk(data, key, h.Bytes+512)
	if !errors.Is(err, frames.ErrCorrupt) {
		t.Fatalf("expecting %d bytes of a %d-byte chunk: %v", h.Bytes+512, h.Bytes, err)
	}
	checkErr(t, err, key)
	// It re-encodes to a chunk with the same header and content.
	var buf bytes.Buffer
	h2, _, err := frames.WriteChunk(&buf, content, frames.WriteOptions{})
	if err != nil || h2 != h {
		t.Fatalf("accepted chunk re-encodes as %+v (%v), want %+v", h2, err, h)
	}
	if _, again, err := readChunk(buf.Bytes(), key, 0); err != nil || !bytes.Equal(again, content) {
		t.Fatalf("re-encoded chunk does not decode to the same content: %v", err)
	}
}

// manifestSeeds returns real manifests, and full snapshots, which share
// the snapshot key: the golden files and a few more.
func manifestSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{golden(t, "manifest-v2.gz"), golden(t, "snapshot-v1.gz")}
	ref := func(first, pages uint32, b byte) frames.ChunkRef {
		return frames.ChunkRef{FirstPage: first, Pages: pages, Hash: frames.SumChunk([]byte{b}), StoredSize: 100 + uint64(b)}
	}
	for _, m := range []frames.Manifest{
		{Epoch: 1},
		{Epoch: 1, Lanes: []frames.ManifestLane{{Kind: frames.LaneSQLitePages, PageSize: 4096, ChunkPages: 64}}},
		{Epoch: 4, Seq: 77, CommitTime: 12345, Predecessor: frames.Lineage{Epoch: 2, Seq: 70}, Lanes: []frames.ManifestLane{
			{Lane: 0, Kind: frames.LaneSQLitePages, PageSize: 512, Pages: 5, Checksum: 9, ChunkPages: 2,
				Chunks: []frames.ChunkRef{ref(1, 2, 1), ref(3, 2, 2), ref(5, 1, 3)}},
			{Lane: 2, Kind: frames.LaneSQLitePages, PageSize: 1024, ChunkPages: 8},
			{Lane: 7, Kind: frames.LaneSQLitePages, PageSize: 65536, Pages: 4, Checksum: 1, ChunkPages: 4,
				Chunks: []frames.ChunkRef{ref(1, 4, 4)}},
		}},
	} {
		var buf bytes.Buffer
		if err := frames.WriteManifest(&buf, m, frames.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

const manifestKey = "fuzz-manifest"

func readManifest(data []byte, key string) (frames.Manifest, error) {
	return frames.ReadManifest(bytes.NewReader(data), key, limits)
}

// FuzzReadManifest fuzzes both readers of a snapshot key's object:
// ReadManifest, and OpenSnapshot, which must agree with it on manifests
// and read full snapshots as NewSnapshotReader does.
func FuzzReadManifest(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkSnapshotObject)
}

// FuzzReadManifestContent fuzzes what is inside the seal (content_test.go).
func FuzzReadManifestContent(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(unseal(f, s))
	}
	f.Fuzz(func(t *testing.T, content []byte) { checkSnapshotObject(t, seal(t, content)) })
}

// checkSnapshotObject checks the promises of both readers of a snapshot
// key's object on one object: bounded allocation, errors naming the key and
// matching one sentinel, agreement between them, and, when a manifest is
// accepted, the layout checkManifest checks, its key, and a re-encoding
// that decodes the same.
func checkSnapshotObject(t *testing.T, data []byte) {
	var m frames.Manifest
	var err error
	if alloc := allocatedBy(func() { m, err = readManifest(data, manifestKey) }); alloc > allocBound {
		t.Fatalf("decoding %d bytes allocated %d", len(data), alloc)
	}
	if err != nil {
		checkErr(t, err, manifestKey)
	}
	var om *frames.Manifest
	var lanes [][]byte
	var oerr error
	if alloc := allocatedBy(func() { om, lanes, oerr = openSnapshot(data) }); alloc > allocBound {
		t.Fatalf("OpenSnapshot of %d bytes allocated %d", len(data), alloc)
	}
	// NewSnapshotReader, with the same limits, reads full snapshots only.
	_, slanes, serr := decodeSnapshot(data)
	switch {
	case oerr != nil:
		checkErr(t, oerr, manifestKey)
		if err == nil || serr == nil {
			t.Fatalf("OpenSnapshot refuses (%v) what ReadManifest (%v) or NewSnapshotReader (%v) accepts", oerr, err, serr)
		}
		return
	case om == nil:
		// A full snapshot: ReadManifest refused it as one, and
		// NewSnapshotReader reads the same lanes.
		if !errors.Is(err, frames.ErrUnknownKind) {
			t.Fatalf("OpenSnapshot read a full snapshot (%d lanes), ReadManifest said %v", len(lanes), err)
		}
		if serr != nil || !reflect.DeepEqual(lanes, slanes) {
			t.Fatalf("OpenSnapshot read a full snapshot NewSnapshotReader reads otherwise (%v)", serr)
		}
		return
	case err != nil:
		t.Fatalf("OpenSnapshot accepted a manifest ReadManifest refuses: %v", err)
	case !reflect.DeepEqual(*om, m):
		t.Fatalf("OpenSnapshot read %+v, ReadManifest %+v", *om, m)
	case !errors.Is(serr, frames.ErrUnknownKind):
		t.Fatalf("NewSnapshotReader of a manifest: %v", serr)
	}
	checkManifest(t, m)
	// Under its own snapshot key it is accepted; under another seq's,
	// refused naming the key.
	key := fuzzActor.SnapshotKey(m.Epoch, m.Seq)
	if _, err := readManifest(data, key); err != nil {
		t.Fatalf("refused under its own key: %v", err)
	}
	if m.Seq < math.MaxUint64 {
		okey := fuzzActor.SnapshotKey(m.Epoch, m.Seq+1)
		_, err := readManifest(data, okey)
		var mm *frames.KeyMismatchError
		if !errors.As(err, &mm) {
			t.Fatalf("accepted under another seq's key, or refused otherwise: %v", err)
		}
		checkErr(t, err, okey)
	}
	// It re-encodes, and decodes to the same manifest.
	var buf bytes.Buffer
	if err := frames.WriteManifest(&buf, m, frames.WriteOptions{}); err != nil {
		t.Fatalf("accepted manifest does not re-encode: %v", err)
	}
	again, err := readManifest(buf.Bytes(), key)
	if err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("re-encoded manifest decodes as %+v (%v), want %+v", again, err, m)
	}
}

// openSnapshot reads a snapshot key's object with OpenSnapshot: the
// manifest, or every lane of a full snapshot.
func openSnapshot(data []byte) (*frames.Manifest, [][]byte, error) {
	sr, m, err := frames.OpenSnapshot(bytes.NewReader(data), manifestKey, limits)
	if err != nil || m != nil {
		return m, nil, err
	}
	var lanes [][]byte
	for {
		_, r, err := sr.NextLane()
		if err == io.EOF {
			return nil, lanes, nil
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, nil, err
		}
		lanes = append(lanes, b)
	}
}

// checkManifest checks what an accepted manifest promises, independently
// of the reader: lanes ascending, and each lane's chunks cover its pages
// exactly, in order, every one chunkPages long but the last.
func checkManifest(t *testing.T, m frames.Manifest) {
	t.Helper()
	for i, l := range m.Lanes {
		if i > 0 && l.Lane <= m.Lanes[i-1].Lane {
			t.Fatalf("lanes %d then %d accepted", m.Lanes[i-1].Lane, l.Lane)
		}
		if l.ChunkPages == 0 || uint64(l.ChunkPages)*uint64(l.PageSize) > limits.MaxChunkBytes {
			t.Fatalf("lane %d: chunks of %d pages of %d bytes accepted", l.Lane, l.ChunkPages, l.PageSize)
		}
		next := uint64(1)
		for j, c := range l.Chunks {
			if uint64(c.FirstPage) != next || c.Pages == 0 || c.Pages > l.ChunkPages || (j < len(l.Chunks)-1 && c.Pages != l.ChunkPages) {
				t.Fatalf("lane %d: chunk %d covers %d+%d, want it from page %d", l.Lane, j, c.FirstPage, c.Pages, next)
			}
			next += uint64(c.Pages)
		}
		if next != uint64(l.Pages)+1 {
			t.Fatalf("lane %d: chunks cover %d pages of %d", l.Lane, next-1, l.Pages)
		}
	}
	if p := m.Predecessor; p.Epoch == 0 && p.Seq != 0 || p.Epoch != 0 && (p.Epoch >= m.Epoch || p.Seq > m.Seq) {
		t.Fatalf("lineage %+v accepted for epoch %d seq %d", p, m.Epoch, m.Seq)
	}
}

// The content fuzzers above test something real only if seal makes files
// framectl accepts: every seed, unsealed and sealed again, still reads.
func TestChunkedSeedsResealed(t *testing.T) {
	for _, obj := range chunkSeeds(t) {
		want, _, err := readChunk(obj, chunkKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		var resealed []byte
		if obj[0] == 0x1f {
			resealed = seal(t, unsealT(t, obj))
		} else if resealed = zstdFile(splitZstdChunk(t, obj)); !bytes.Equal(resealed, obj) {
			t.Fatalf("resealed zstd chunk differs from the writer's (%d bytes, %d)", len(resealed), len(obj))
		}
		got, _, err := readChunk(resealed, chunkKey, 0)
		if err != nil || got != want {
			t.Fatalf("resealed chunk reads as %+v (%v), want %+v", got, err, want)
		}
	}
	for _, obj := range manifestSeeds(t) {
		want, wlanes, werr := openSnapshot(obj)
		got, glanes, err := openSnapshot(seal(t, unsealT(t, obj)))
		if werr != nil || err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(glanes, wlanes) {
			t.Fatalf("resealed snapshot object reads as %+v (%v), want %+v (%v)", got, err, want, werr)
		}
	}
}
