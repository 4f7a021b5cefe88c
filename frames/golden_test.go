package frames

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenBatch and goldenSnapshot are fixed samples whose encodings are
// pinned. The .content files hold the decompressed bytes (the Cap'n Proto
// encoding, deterministic); the .gz files are whole objects as written when
// the format was fixed, which every later build must still read.
func goldenBatch() (uint64, []Frame) {
	p := func(n uint32, b byte) Page { return Page{Number: n, Data: bytes.Repeat([]byte{b}, 512)} }
	return 3, []Frame{
		{Epoch: 3, FirstSeq: 1, LastSeq: 1, CommitTime: 1700000000000000001, Kind: KindInitialize},
		{Epoch: 3, FirstSeq: 2, LastSeq: 4, CommitTime: 1700000000000000004, Kind: KindSQLitePages,
			SQLite: SQLitePages{PageSize: 512, DatabasePages: 2, Before: 0, After: 0x1122334455667788, Pages: []Page{p(1, 0xaa), p(2, 0xbb)}}},
		{Epoch: 3, FirstSeq: 5, LastSeq: 5, Lane: 1, CommitTime: 1700000000000000005, Kind: KindNewLane, NewLane: LaneSQLitePages},
		{Epoch: 3, FirstSeq: 6, LastSeq: 6, Lane: 1, CommitTime: 1700000000000000006, Kind: KindDeleteLane},
	}
}

func goldenSnapshot() (Snapshot, []byte) {
	lane := bytes.Repeat([]byte{0x5a}, 1024)
	sum, _, _ := DatabaseChecksum(bytes.NewReader(lane), 512)
	return Snapshot{Epoch: 3, Seq: 6, CommitTime: 1700000000000000006, Lanes: []SnapshotLane{
		{Lane: 0, Kind: LaneSQLitePages, PageSize: 512, Bytes: 1024, Checksum: sum},
	}}, lane
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b)) // the standard library reads our files
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

// unzstd decodes b with klauspost's zstd decoder, which skips skippable
// frames as RFC 8878 says any decoder does (so does the zstd tool).
func unzstd(t *testing.T, b []byte) []byte {
	t.Helper()
	d, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer d.Close()
	out, err := d.DecodeAll(b, nil)
	require.NoError(t, err)
	return out
}

func golden(t *testing.T, name string, encoded []byte) []byte {
	t.Helper()
	dir := filepath.Join("testdata", "golden")
	content := gunzip(t, encoded)
	if *update {
		os.MkdirAll(dir, 0o755)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".content"), content, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".gz"), encoded, 0o644))
	}
	want, err := os.ReadFile(filepath.Join(dir, name+".content"))
	require.NoError(t, err)
	if !bytes.Equal(content, want) {
		t.Fatalf("%s: encoding changed (%d bytes, golden %d). The wire format must not change; if this is a deliberate new version, bump FormatVersion and add new golden files", name, len(content), len(want))
	}
	old, err := os.ReadFile(filepath.Join(dir, name+".gz"))
	require.NoError(t, err)
	return old
}

func TestGoldenBatch(t *testing.T) {
	epoch, frames := goldenBatch()
	old := golden(t, "batch-v1", encodeBatch(t, Epoch(epoch), frames, WriteOptions{}))
	_, got, err := ReadBatch(bytes.NewReader(old), "", Limits{})
	require.NoError(t, err)
	framesEqual(t, got, frames)
}

func TestGoldenSnapshot(t *testing.T) {
	hdr, lane := goldenSnapshot()
	old := golden(t, "snapshot-v1", encodeSnapshot(t, hdr, lane))
	got, lanes, err := readSnapshot(old, "")
	require.NoError(t, err)
	if got.Lanes[0] != hdr.Lanes[0] || got.Seq != hdr.Seq || !bytes.Equal(lanes[0], lane) {
		t.Fatalf("golden snapshot decodes as %+v", got)
	}
}

func goldenChunk() []byte { return bytes.Repeat([]byte{0x5a, 0xa5, 0, 0}, 256) }

// Both chunk formats read: chunk-v1.gz is a gzip chunk file as framectl
// wrote before zstd chunk files, and must read for ever; chunk-v2.zst is
// a zstd one. What the zstd writer makes today has chunk-v2's header frame
// byte for byte (the frame itself may change with the compressor, as
// DEFLATE's bytes may) and decodes with the reference zstd decoder to the
// content.
func TestGoldenChunk(t *testing.T) {
	content := goldenChunk()
	key := Actor{Namespace: NamespaceID("", "golden"), Actor: "01"}.ChunkKey(SumChunk(content))
	var gz bytes.Buffer
	h, _, err := writeGzipChunk(&gz, content, DefaultLevel)
	require.NoError(t, err)
	old := golden(t, "chunk-v1", gz.Bytes())
	got, out, err := ReadChunk(bytes.NewReader(old), key, 1024, nil, Limits{})
	require.NoError(t, err)
	require.Equal(t, h, got)
	require.True(t, bytes.Equal(content, out), "golden chunk-v1 content")

	var zs bytes.Buffer
	_, _, err = WriteChunk(&zs, content, WriteOptions{})
	require.NoError(t, err)
	path := filepath.Join("testdata", "golden", "chunk-v2.zst")
	if *update {
		require.NoError(t, os.WriteFile(path, zs.Bytes(), 0o644))
	}
	old, err = os.ReadFile(path)
	require.NoError(t, err)
	hdrLen := 8 + int(binary.LittleEndian.Uint32(old[4:]))
	require.Equal(t, old[:hdrLen], zs.Bytes()[:hdrLen], "the header frame of a zstd chunk file changed: the wire format must not change")
	got, out, err = ReadChunk(bytes.NewReader(old), key, 1024, nil, Limits{})
	require.NoError(t, err)
	require.Equal(t, h, got)
	require.True(t, bytes.Equal(content, out), "golden chunk-v2 content")
	for _, obj := range [][]byte{old, zs.Bytes()} {
		require.True(t, bytes.Equal(content, unzstd(t, obj)), "the zstd decoder reads a zstd chunk file as its content")
	}
}

func readGolden(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", "golden", name))
}

// goldenManifest lists the golden chunk twice: a lane of 4 pages of 512
// bytes in chunks of 2, both holding the same bytes, so one chunk object,
// whose stored size is that of chunk-v1.gz (not of what today's compressor
// makes, which may change without changing the format).
func goldenManifest(t *testing.T) Manifest {
	content := goldenChunk()
	lane := append(bytes.Clone(content), content...)
	sum, _, _ := DatabaseChecksum(bytes.NewReader(lane), 512)
	obj, err := readGolden("chunk-v1.gz")
	require.NoError(t, err)
	ref := func(first uint32) ChunkRef {
		return ChunkRef{FirstPage: first, Pages: 2, Hash: SumChunk(content), StoredSize: uint64(len(obj))}
	}
	return Manifest{Epoch: 5, Seq: 40, CommitTime: 1700000000000000040, Predecessor: Lineage{Epoch: 3, Seq: 31},
		Lanes: []ManifestLane{{Lane: 0, Kind: LaneSQLitePages, PageSize: 512, Pages: 4, Checksum: sum, ChunkPages: 2,
			Chunks: []ChunkRef{ref(1), ref(3)}}}}
}

func TestGoldenManifest(t *testing.T) {
	key := Actor{Namespace: NamespaceID("", "golden"), Actor: "01"}.SnapshotKey(5, 40)
	m := goldenManifest(t)
	// Chunk fingerprints were added to the manifest after its first
	// golden file, without a new version: a manifest without them still
	// reads, every fingerprint 0 (not recorded).
	old, err := readGolden("manifest-v2.gz")
	require.NoError(t, err)
	got, err := ReadManifest(bytes.NewReader(old), key, Limits{})
	require.NoError(t, err)
	require.Equal(t, m, got)

	for i := range m.Lanes[0].Chunks {
		m.Lanes[0].Chunks[i].Fingerprint = 0x0123456789abcdef + uint64(i)
	}
	var buf bytes.Buffer
	require.NoError(t, WriteManifest(&buf, m, WriteOptions{}))
	old = golden(t, "manifest-v2-fingerprint", buf.Bytes())
	got, err = ReadManifest(bytes.NewReader(old), key, Limits{})
	require.NoError(t, err)
	require.Equal(t, m, got)
}
