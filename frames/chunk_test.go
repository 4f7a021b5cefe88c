package frames

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	capnp "capnproto.org/go/capnp/v3"
	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wire "github.com/framectl/framectl/capnp"
)

var chunkActor = Actor{Namespace: NamespaceID("", "chunks"), Actor: "00ff"}

func encodeChunk(t testing.TB, content []byte) ([]byte, ChunkHeader) {
	t.Helper()
	var buf bytes.Buffer
	h, stored, err := WriteChunk(&buf, content, WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(buf.Len()), stored, "stored size WriteChunk reports")
	return buf.Bytes(), h
}

func readChunk(data []byte, key string, size uint64) (ChunkHeader, []byte, error) {
	return ReadChunk(bytes.NewReader(data), key, size, nil, Limits{})
}

// requireNamed asserts that err is a *Error naming key and matching want.
func requireNamed(t *testing.T, err, want error, key, what string) {
	t.Helper()
	require.ErrorIs(t, err, want, "%s", what)
	var fe *Error
	require.ErrorAs(t, err, &fe, "%s", what)
	require.Equal(t, key, fe.Key, "%s: the error names the object", what)
}

func TestChunkRoundTrip(t *testing.T) {
	for _, size := range []int{512, 3 * 4096, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			content, _ := testLane(uint64(size), 512, size/512)
			data, h := encodeChunk(t, content)
			require.Equal(t, ChunkHeader{Bytes: uint64(size), Hash: SumChunk(content)}, h)
			key := chunkActor.ChunkKey(h.Hash)
			for _, want := range []uint64{0, uint64(size)} {
				got, out, err := readChunk(data, key, want)
				require.NoError(t, err, "expected size %d", want)
				require.Equal(t, h, got)
				require.True(t, bytes.Equal(content, out), "content differs")
			}
			// A buffer with room is reused, not replaced.
			dst := make([]byte, 0, size+100)
			_, out, err := ReadChunk(bytes.NewReader(data), key, 0, dst, Limits{})
			require.NoError(t, err)
			require.True(t, bytes.Equal(content, out), "content differs")
			require.Same(t, &dst[:1][0], &out[0], "the content was not read into dst")
			// A zstd decoder reads the file as the pages alone: the header
			// and the seal are skippable frames.
			require.True(t, bytes.Equal(content, unzstd(t, data)), "zstd does not read the file as the pages")
			// A gzip chunk file, as framectl wrote before, reads the same.
			var gz bytes.Buffer
			_, _, err = writeGzipChunk(&gz, content, DefaultLevel)
			require.NoError(t, err)
			gh, gout, err := readChunk(gz.Bytes(), key, uint64(size))
			require.NoError(t, err)
			require.Equal(t, h, gh)
			require.True(t, bytes.Equal(content, gout), "gzip chunk content differs")
		})
	}
}

func TestWriteChunkRefuses(t *testing.T) {
	var buf bytes.Buffer
	for name, c := range map[string]struct {
		content []byte
		want    error
	}{
		"empty":           {nil, ErrInvalid},
		"not whole pages": {make([]byte, 1000), ErrInvalid},
		"past the limit":  {make([]byte, DefaultMaxChunkBytes+512), ErrTooLarge},
	} {
		_, _, err := WriteChunk(&buf, c.content, WriteOptions{})
		assert.ErrorIs(t, err, c.want, "%s", name)
	}
	require.Zero(t, buf.Len(), "a refused chunk wrote bytes")
}

func smallChunk(t testing.TB) ([]byte, string) {
	content, _ := testLane(5, 512, 1)
	data, h := encodeChunk(t, content)
	return data, chunkActor.ChunkKey(h.Hash)
}

// smallChunks returns the small chunk in both formats.
func smallChunks(t testing.TB) map[string][]byte {
	content, _ := testLane(5, 512, 1)
	data, _ := encodeChunk(t, content)
	var gz bytes.Buffer
	_, _, err := writeGzipChunk(&gz, content, DefaultLevel)
	require.NoError(t, err)
	return map[string][]byte{"zstd": data, "gzip": gz.Bytes()}
}

func TestChunkEveryByteFlipDetected(t *testing.T) {
	_, key := smallChunk(t)
	for format, data := range smallChunks(t) {
		t.Logf("sample %s chunk: %d bytes", format, len(data))
		everyByteFlip(t, format+": ", data, func(b []byte) error {
			_, _, err := readChunk(b, key, 0)
			return err
		})
	}
}

func TestChunkEveryTruncationDetected(t *testing.T) {
	_, key := smallChunk(t)
	for format, data := range smallChunks(t) {
		for cut := 0; cut < len(data); cut++ {
			_, _, err := readChunk(data[:cut], key, 0)
			checkDamage(t, fmt.Sprintf("%s: cut at %d", format, cut), err)
		}
		_, _, err := readChunk(append(bytes.Clone(data), 0), key, 0)
		checkDamage(t, format+": trailing byte", err)
	}
}

// A sound chunk under another chunk's key (a chunk swapped for another of
// the same actor) is refused, after it verified, naming both hashes.
func TestChunkUnderAnotherKey(t *testing.T) {
	a, _ := testLane(6, 512, 2)
	b, _ := testLane(7, 512, 2)
	dataA, hA := encodeChunk(t, a)
	_, hB := encodeChunk(t, b)
	key := chunkActor.ChunkKey(hB.Hash)
	_, out, err := readChunk(dataA, key, 0)
	requireNamed(t, err, ErrCorrupt, key, "chunk A under B's key")
	require.Nil(t, out)
	var mm *KeyMismatchError
	require.ErrorAs(t, err, &mm)
	require.Equal(t, hA.Hash, mm.Chunk, "the hash the content has")
	require.Equal(t, hB.Hash, mm.Key.Chunk, "the hash the key names")

	// A key of another kind is the caller's mistake.
	skey := chunkActor.SnapshotKey(1, 1)
	_, _, err = readChunk(dataA, skey, 0)
	requireNamed(t, err, ErrInvalid, skey, "snapshot key")
	// A name that is not a bucket key (a local file) is not compared.
	_, _, err = readChunk(dataA, "chunk.gz", 0)
	require.NoError(t, err)
}

// chunkHeaderMsg encodes a ChunkHeader message with any field values.
func chunkHeaderMsg(t testing.TB, version uint16, n uint64, hash []byte) []byte {
	t.Helper()
	msg, seg, _ := newMessage(96)
	ch, _ := wire.NewRootChunkHeader(seg)
	ch.SetVersion(version)
	ch.SetByteLength(n)
	if hash != nil {
		require.NoError(t, ch.SetHash(hash))
	}
	return marshal(t, msg)
}

// Objects the writer never makes, each sealed so that only the rule under
// test can refuse them.
func TestChunkStructureEnforced(t *testing.T) {
	content, _ := testLane(8, 512, 2)
	sum := SumChunk(content)
	other := SumChunk(content[:512])
	key := chunkActor.ChunkKey(sum)
	hdr := func(n uint64, h ChunkHash) []byte { return chunkHeaderMsg(t, wire.ChunkFormatVersion, n, h[:]) }
	for name, c := range map[string]struct {
		data []byte
		want error
	}{
		"no header":           {sealed(t), ErrCorrupt},
		"version 2":           {sealed(t, chunkHeaderMsg(t, 2, 1024, sum[:]), content), ErrUnknownKind},
		"no hash":             {sealed(t, chunkHeaderMsg(t, wire.ChunkFormatVersion, 1024, nil), content), ErrCorrupt},
		"31-byte hash":        {sealed(t, chunkHeaderMsg(t, wire.ChunkFormatVersion, 1024, sum[:31]), content), ErrCorrupt},
		"zero length":         {sealed(t, hdr(0, sum)), ErrCorrupt},
		"not whole pages":     {sealed(t, hdr(1000, sum), content[:1000]), ErrCorrupt},
		"content short":       {sealed(t, hdr(1024, sum), content[:1000]), ErrCorrupt},
		"content long":        {sealed(t, hdr(1024, sum), content, []byte{0}), ErrCorrupt},
		"hash differs":        {sealed(t, hdr(1024, other), content), ErrCorrupt},
		"content altered":     {sealed(t, hdr(1024, sum), content[:512], content[:512]), ErrCorrupt},
		"past MaxChunkBytes":  {sealed(t, hdr(DefaultMaxChunkBytes+512, sum), content), ErrTooLarge},
		"header message huge": {sealed(t, segmentTable(1<<28), content), ErrTooLarge},
		"header past 1 KiB":   {sealed(t, segmentTable(200), make([]byte, 1600)), ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, _, err = readChunk(c.data, key, 0) })
			requireNamed(t, err, c.want, key, name)
			assert.Less(t, alloc, uint64(1<<20), "allocated refusing it")
		})
	}
}

// The size a manifest expects is checked against the header before the
// content is allocated: a header declaring 16 MiB for a 1 KiB range costs
// nothing.
func TestChunkExpectedSize(t *testing.T) {
	content, _ := testLane(9, 512, 2)
	sum := SumChunk(content)
	key := chunkActor.ChunkKey(sum)
	data, _ := encodeChunk(t, content)
	_, _, err := readChunk(data, key, 2048)
	requireNamed(t, err, ErrCorrupt, key, "expects 2048")

	lying := sealed(t, chunkHeaderMsg(t, wire.ChunkFormatVersion, DefaultMaxChunkBytes, sum[:]), content)
	alloc := allocated(func() { _, _, err = readChunk(lying, key, 1024) })
	requireNamed(t, err, ErrCorrupt, key, "header declares 16 MiB")
	assert.Less(t, alloc, uint64(1<<20), "allocated refusing it")

	// A reader's own limit is applied whatever the caller expects.
	_, _, err = ReadChunk(bytes.NewReader(data), key, 1024, nil, Limits{MaxChunkBytes: 512})
	requireNamed(t, err, ErrTooLarge, key, "MaxChunkBytes 512")
}

// A failure of the underlying reader is passed through, not called damage.
func TestChunkReaderErrorsPassThrough(t *testing.T) {
	data, key := smallChunk(t)
	boom := errors.New("connection reset")
	for _, cut := range []int{0, 5, 60, len(data) - 20} {
		r := io.MultiReader(bytes.NewReader(data[:cut]), &failingReader{boom})
		_, _, err := ReadChunk(r, key, 0, nil, Limits{})
		require.ErrorIs(t, err, boom, "cut %d", cut)
		require.NotErrorIs(t, err, ErrCorrupt, "cut %d: a network error was reported as damage", cut)
		require.NotErrorIs(t, err, ErrTruncated, "cut %d: a network error was reported as damage", cut)
	}
}

// The header message is as small as documented (doc.go, "Chunk files").
func TestChunkHeaderSize(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeChunkHeaderVersion(&buf, ChunkHeader{Bytes: 512}, zstdChunkVersion))
	require.Equal(t, 72, buf.Len())
	msg, err := capnp.Unmarshal(buf.Bytes())
	require.NoError(t, err)
	ch, err := wire.ReadRootChunkHeader(msg)
	require.NoError(t, err)
	require.Equal(t, uint64(512), ch.ByteLength())
	require.Equal(t, uint32(0), binary.LittleEndian.Uint32(buf.Bytes()), "one segment")
}

func TestChunkHashText(t *testing.T) {
	h := SumChunk([]byte("abc"))
	// SHA-256("abc"), FIPS 180-2 appendix B.1.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	require.Equal(t, want, h.String())
	got, err := ParseChunkHash(want)
	require.NoError(t, err)
	require.Equal(t, h, got)
	text, err := h.MarshalText()
	require.NoError(t, err)
	var back ChunkHash
	require.NoError(t, back.UnmarshalText(text))
	require.Equal(t, h, back)
	for _, s := range []string{"", want[:63], want + "0", strings.ToUpper(want), "g" + want[1:]} {
		_, err := ParseChunkHash(s)
		assert.ErrorIs(t, err, ErrInvalid, "%q", s)
	}
	require.ErrorIs(t, back.UnmarshalText([]byte("x")), ErrInvalid)
}

// zstdFile builds a zstd chunk file of a header frame holding hdr, the
// given frames, and a seal that matches them: only the rule under test
// can refuse it.
func zstdFile(hdr []byte, frames ...[]byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, zstdChunkMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	for _, f := range frames {
		b = append(b, f...)
	}
	seal := xxhash.Sum64(b)
	b = binary.LittleEndian.AppendUint32(b, zstdSealMagic)
	b = binary.LittleEndian.AppendUint32(b, zstdSealLen-8)
	b = append(b, 'F', 'C')
	return binary.LittleEndian.AppendUint64(b, seal)
}

// zstdFrame compresses content as one zstd frame with the encoder's
// options, framectl's (a content size and a checksum) unless changed.
func zstdFrame(t testing.TB, content []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil, append([]zstd.EOption{zstd.WithEncoderConcurrency(1)}, opts...)...)
	require.NoError(t, err)
	defer e.Close()
	return e.EncodeAll(content, nil)
}

// zstdStream compresses content as a streaming encoder does when it
// flushes before it knows the size: no content size in the frame header.
func zstdStream(t testing.TB, content []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	e, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	half := len(content) / 2
	_, err = e.Write(content[:half])
	require.NoError(t, err)
	require.NoError(t, e.Flush())
	_, err = e.Write(content[half:])
	require.NoError(t, err)
	require.NoError(t, e.Close())
	var zh zstd.Header
	require.NoError(t, zh.Decode(buf.Bytes()))
	require.False(t, zh.HasFCS, "the stream declares its size")
	return buf.Bytes()
}

// Zstd chunk files the writer never makes, each sealed so that only the
// rule under test can refuse them, and none allocating much to refuse.
func TestZstdChunkStructureEnforced(t *testing.T) {
	content, _ := testLane(8, 512, 2)
	sum := SumChunk(content)
	other := SumChunk(content[:512])
	key := chunkActor.ChunkKey(sum)
	hdr := func(n uint64, h ChunkHash) []byte { return chunkHeaderMsg(t, zstdChunkVersion, n, h[:]) }
	good := hdr(1024, sum)
	frame := zstdFrame(t, content)
	skippable := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0x184D2A53), 0)
	require.True(t, bytes.Equal(content, unzstd(t, zstdFile(good, frame))), "the crafted file is sound")
	for name, c := range map[string]struct {
		data []byte
		want error
	}{
		"no header":              {zstdFile(nil, frame), ErrCorrupt},
		"version 1":              {zstdFile(chunkHeaderMsg(t, wire.ChunkFormatVersion, 1024, sum[:]), frame), ErrUnknownKind},
		"version 3":              {zstdFile(chunkHeaderMsg(t, 3, 1024, sum[:]), frame), ErrUnknownKind},
		"no hash":                {zstdFile(chunkHeaderMsg(t, zstdChunkVersion, 1024, nil), frame), ErrCorrupt},
		"zero length":            {zstdFile(hdr(0, sum), frame), ErrCorrupt},
		"not whole pages":        {zstdFile(hdr(1000, sum), zstdFrame(t, content[:1000])), ErrCorrupt},
		"header with more bytes": {zstdFile(append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 0), frame), ErrCorrupt},
		"header of 2 KiB":        {zstdFile(make([]byte, 2048), frame), ErrTooLarge},
		"no frame":               {zstdFile(good), ErrCorrupt},
		"frame short":            {zstdFile(good, zstdFrame(t, content[:512])), ErrCorrupt},
		"frame long":             {zstdFile(good, zstdFrame(t, append(bytes.Clone(content), content[:512]...))), ErrCorrupt},
		"two frames":             {zstdFile(hdr(512, other), zstdFrame(t, content[:512]), zstdFrame(t, content[:512])), ErrCorrupt},
		"a skippable frame next": {zstdFile(good, frame, skippable), ErrCorrupt},
		"no content size":        {zstdFile(good, zstdStream(t, content)), ErrCorrupt},
		"no checksum":            {zstdFile(good, zstdFrame(t, content, zstd.WithEncoderCRC(false))), ErrCorrupt},
		"hash differs":           {zstdFile(hdr(1024, other), frame), ErrCorrupt},
		"content altered":        {zstdFile(good, zstdFrame(t, append(bytes.Clone(content[:512]), content[:512]...))), ErrCorrupt},
		"past MaxChunkBytes":     {zstdFile(hdr(DefaultMaxChunkBytes+512, sum), frame), ErrTooLarge},
		"header message huge":    {zstdFile(segmentTable(1<<28), frame), ErrTooLarge},
		"garbage frame":          {zstdFile(good, bytes.Repeat([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xff}, 100)), ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, _, err = readChunk(c.data, key, 0) })
			requireNamed(t, err, c.want, key, name)
			assert.Less(t, alloc, uint64(1<<20), "allocated refusing it")
		})
	}
}

// A frame that declares 16 MiB while the header declares 1 KiB, or that
// decodes past its declared size, costs at most what the header allowed.
func TestZstdChunkBoundedByHeader(t *testing.T) {
	big := make([]byte, 8<<20)
	small, _ := testLane(10, 512, 2)
	sum := SumChunk(small)
	key := chunkActor.ChunkKey(sum)
	data := zstdFile(chunkHeaderMsg(t, zstdChunkVersion, 1024, sum[:]), zstdFrame(t, big))
	var err error
	alloc := allocated(func() { _, _, err = readChunk(data, key, 0) })
	requireNamed(t, err, ErrCorrupt, key, "8 MiB frame under a 1 KiB header")
	assert.Less(t, alloc, uint64(1<<20), "allocated refusing it")
}

// ReadChunkSealed refuses every damaged or misplaced chunk ReadChunk
// refuses (every byte flip, every truncation, another chunk's key) and
// accepts only what differs from it by the content's SHA-256 alone: a
// sealed object whose header lied about its content.
func TestReadChunkSealed(t *testing.T) {
	_, key := smallChunk(t)
	for format, data := range smallChunks(t) {
		_, want, err := readChunk(data, key, 0)
		require.NoError(t, err)
		_, got, err := ReadChunkSealed(bytes.NewReader(data), key, 0, nil, Limits{})
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s: content differs", format)
		for pos := range data {
			b := bytes.Clone(data)
			b[pos] ^= 0x10
			_, _, err := ReadChunkSealed(bytes.NewReader(b), key, 0, nil, Limits{})
			checkDamage(t, fmt.Sprintf("%s: byte %d", format, pos), err)
		}
		for cut := range len(data) {
			_, _, err := ReadChunkSealed(bytes.NewReader(data[:cut]), key, 0, nil, Limits{})
			checkDamage(t, fmt.Sprintf("%s: cut at %d", format, cut), err)
		}
	}
	a, _ := testLane(6, 512, 2)
	b, _ := testLane(7, 512, 2)
	dataA, _ := encodeChunk(t, a)
	_, hB := encodeChunk(t, b)
	_, _, err := ReadChunkSealed(bytes.NewReader(dataA), chunkActor.ChunkKey(hB.Hash), 0, nil, Limits{})
	var mm *KeyMismatchError
	require.ErrorAs(t, err, &mm, "chunk A under B's key")

	lying := zstdFile(chunkHeaderMsg(t, zstdChunkVersion, 1024, hB.Hash[:]), zstdFrame(t, a))
	key = chunkActor.ChunkKey(hB.Hash)
	_, _, err = readChunk(lying, key, 0)
	requireNamed(t, err, ErrCorrupt, key, "ReadChunk, a header that lies")
	_, got, err := ReadChunkSealed(bytes.NewReader(lying), key, 0, nil, Limits{})
	require.NoError(t, err, "ReadChunkSealed leaves the lie to its caller's checksum")
	require.True(t, bytes.Equal(a, got))
}
