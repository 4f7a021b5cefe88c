package frames

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	capnp "capnproto.org/go/capnp/v3"

	wire "github.com/framectl/framectl/capnp"
)

// ChunkHeader describes a chunk object: its first message. The object's
// layout and the rules its reader enforces are under "Chunk files" in the
// package documentation (doc.go).
type ChunkHeader struct {
	Bytes uint64    // content length: a positive multiple of chunkUnit, DefaultChunkBytes as framectl writes
	Hash  ChunkHash // SumChunk of the content; the <hash> of its key
}

// chunkUnit divides every chunk's length: a chunk is whole pages, and the
// smallest page size is 512 bytes.
const chunkUnit = 512

// maxChunkHeaderSize bounds the ChunkHeader message (72 bytes as written):
// a chunk object claiming a large first message is refused having read 8
// bytes, whatever Limits.MaxMessageSize allows.
const maxChunkHeaderSize = 1 << 10

// DefaultChunkBytes is the chunk size a manifest's writer uses unless it
// has a reason not to: DefaultChunkPages pages per chunk. Readers assume
// nothing about it (each lane of a manifest records its chunkPages, and a
// chunk's length is checked against its manifest and Limits.MaxChunkBytes,
// never against this), so it can change without a new format version. Why
// 256 KiB is under "Chunk size" in the package documentation (doc.go),
// with what BenchmarkChunk and BenchmarkManifest measured.
const DefaultChunkBytes = 256 << 10

// DefaultChunkPages returns the pages per chunk for a lane of pageSize
// bytes per page: DefaultChunkBytes of them, at least 1.
func DefaultChunkPages(pageSize uint32) uint32 {
	if pageSize == 0 || pageSize >= DefaultChunkBytes {
		return 1
	}
	return DefaultChunkBytes / pageSize
}

// WriteChunk encodes content, whole pages of one lane, as a chunk object
// into w, and returns its header and the object's size in bytes; the
// object's key is Actor.ChunkKey(header.Hash). It writes a zstd chunk file
// (version 2) at the zstd level opts.Level maps to (zstdLevel). It hashes
// content itself rather than trust a hash it is given: the key is a
// promise about the bytes, and a manifest that names it is only as good as
// that promise.
func WriteChunk(w io.Writer, content []byte, opts WriteOptions) (ChunkHeader, uint64, error) {
	opts = opts.withDefaults()
	h, err := chunkHeaderOf(content)
	if err != nil {
		return ChunkHeader{}, 0, &Error{Object: "chunk", Err: err}
	}
	bp, _ := zstdBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer zstdBufs.Put(bp)
	obj, err := appendZstdChunk((*bp)[:0], h, content, opts.Level)
	*bp = obj
	if err == nil {
		_, err = w.Write(obj)
	}
	if err != nil {
		return ChunkHeader{}, 0, &Error{Object: "chunk", Err: err}
	}
	return h, uint64(len(obj)), nil
}

// chunkHeaderOf checks that content may be a chunk and returns its header.
func chunkHeaderOf(content []byte) (ChunkHeader, error) {
	switch {
	case len(content) == 0 || len(content)%chunkUnit != 0:
		return ChunkHeader{}, invalid(fmt.Sprintf("%d bytes is not a positive multiple of %d (whole pages)", len(content), chunkUnit))
	case uint64(len(content)) > DefaultMaxChunkBytes:
		return ChunkHeader{}, tooLarge(fmt.Sprintf("chunk of %d bytes exceeds what readers accept by default (%d)", len(content), uint64(DefaultMaxChunkBytes)))
	}
	return ChunkHeader{Bytes: uint64(len(content)), Hash: SumChunk(content)}, nil
}

// writeGzipChunk writes content as a gzip chunk file (version 1), the
// format framectl wrote before zstd chunk files: for the tests that show
// such chunks still read.
func writeGzipChunk(w io.Writer, content []byte, level int) (ChunkHeader, uint64, error) {
	h, err := chunkHeaderOf(content)
	if err != nil {
		return ChunkHeader{}, 0, err
	}
	cw := &countingWriter{w: w}
	gz, err := newGzipWriter(cw, level)
	if err != nil {
		return ChunkHeader{}, 0, err
	}
	if err := writeChunkHeaderVersion(gz, h, wire.ChunkFormatVersion); err != nil {
		return ChunkHeader{}, 0, err
	}
	if _, err := gz.Write(content); err != nil {
		return ChunkHeader{}, 0, err
	}
	if err := gz.Close(); err != nil {
		return ChunkHeader{}, 0, err
	}
	return h, cw.n, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

func writeChunkHeaderVersion(w io.Writer, h ChunkHeader, version uint16) error {
	msg, seg, err := newMessage(96)
	if err != nil {
		return err
	}
	ch, err := wire.NewRootChunkHeader(seg)
	if err != nil {
		return err
	}
	ch.SetVersion(version)
	ch.SetByteLength(h.Bytes)
	if err := ch.SetHash(h.Hash[:]); err != nil {
		return err
	}
	return writeMessage(w, msg)
}

// ReadChunk reads a whole chunk object, of either format (a zstd chunk
// file, or a gzip one as framectl wrote before), and returns its header
// and content, only once everything verified: the seal, the gzip
// member's checksum (a zstd frame's is left to the seal and the hash), the content's length against the header, its
// SHA-256 against the header, and then against the key. key names the
// object in errors; when it parses as a chunk key, its hash must be the
// content's ([KeyMismatchError] otherwise: a sound chunk stored under
// another chunk's key).
//
// size is the content length the caller expects (its manifest's pages
// times the lane's page size), or 0 for whatever the header declares
// within Limits.MaxChunkBytes: a header that declares another length is
// refused before anything is allocated for it. The content is read into
// dst when it has room, so a restore can reuse its buffers.
func ReadChunk(r io.Reader, key string, size uint64, dst []byte, lim Limits) (ChunkHeader, []byte, error) {
	return decodeChunk(r, key, size, dst, lim, true)
}

// ReadChunkSealed is ReadChunk without computing the content's SHA-256:
// everything else is verified, the seal over every stored byte and the
// header's hash against the key included, so what it accepts is a chunk
// as its writer stored it under its own name, and only a writer whose
// header lied about its own content could get wrong pages past it (the
// writer hashes the content it encodes, WriteChunk). For a reader that
// checks the pages against a checksum of its own, as chunks.Load checks
// every lane against its manifest's: a restore then spends no time on
// SHA-256, which was a fifth of its CPU. Verify, which must name the
// damaged chunk, reads with ReadChunk.
func ReadChunkSealed(r io.Reader, key string, size uint64, dst []byte, lim Limits) (ChunkHeader, []byte, error) {
	return decodeChunk(r, key, size, dst, lim, false)
}

func decodeChunk(r io.Reader, key string, size uint64, dst []byte, lim Limits, hash bool) (ChunkHeader, []byte, error) {
	lim = lim.withDefaults()
	fail := func(err error) (ChunkHeader, []byte, error) {
		return ChunkHeader{}, nil, &Error{Object: "chunk", Key: key, Err: err}
	}
	k, kerr := ParseKey(key)
	isKey := kerr == nil
	if isKey && k.Kind != KeyChunk {
		return fail(invalid("key names a " + k.Kind.String() + " object, not a chunk"))
	}
	// The first bytes say the format: a zstd chunk file starts with its
	// header frame's magic, a gzip one with gzip's.
	var magic [4]byte
	n, err := io.ReadFull(r, magic[:])
	var h ChunkHeader
	var content []byte
	switch {
	case err != nil && err != io.EOF && err != io.ErrUnexpectedEOF:
		return fail(err)
	case binary.LittleEndian.Uint32(magic[:]) == zstdChunkMagic:
		h, content, err = readZstdChunk(r, size, dst, lim)
	case n == 0:
		return fail(truncated("empty object"))
	default:
		h, content, err = readGzipChunk(io.MultiReader(bytes.NewReader(magic[:n]), r), size, dst, lim)
	}
	if err != nil {
		return fail(err)
	}
	if hash {
		if sum := SumChunk(content); sum != h.Hash {
			return fail(corrupt(fmt.Sprintf("content has hash %s, its header declares %s", sum, h.Hash)))
		}
	}
	if isKey && k.Chunk != h.Hash {
		return fail(&KeyMismatchError{Key: k, Chunk: h.Hash})
	}
	return h, content, nil
}

// readGzipChunk reads a gzip chunk file (version 1) whole, trailer and
// seal verified; the hash of the content is for the caller to check.
func readGzipChunk(r io.Reader, size uint64, dst []byte, lim Limits) (ChunkHeader, []byte, error) {
	g, err := newGzipReader(r, maxChunkHeaderSize+lim.MaxChunkBytes)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	defer g.release()
	hlim := lim
	hlim.MaxMessageSize = min(lim.MaxMessageSize, maxChunkHeaderSize)
	msg, _, err := newMsgReader(g, hlim).next()
	if err == io.EOF {
		return ChunkHeader{}, nil, corrupt("no chunk header")
	}
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	h, err := decodeChunkHeader(msg, lim, wire.ChunkFormatVersion)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	if size != 0 && h.Bytes != size {
		return ChunkHeader{}, nil, corrupt(fmt.Sprintf("header declares %d bytes, the manifest expects %d", h.Bytes, size))
	}
	content := dst
	if uint64(cap(content)) < h.Bytes {
		content = make([]byte, h.Bytes)
	}
	content = content[:h.Bytes]
	if got, err := io.ReadFull(g, content); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			// The gzip reader verified its trailer and seal: the object is
			// whole and holds less than its header declares.
			return ChunkHeader{}, nil, corrupt(fmt.Sprintf("content ends after %d of the %d bytes its header declares", got, h.Bytes))
		}
		return ChunkHeader{}, nil, err
	}
	if err := g.verifyEnd(); err != nil {
		return ChunkHeader{}, nil, err
	}
	return h, content, nil
}

// decodeChunkHeader converts a ChunkHeader message and checks it on its
// own: version is the one its file's format holds.
func decodeChunkHeader(msg *capnp.Message, lim Limits, version uint16) (ChunkHeader, error) {
	ch, err := wire.ReadRootChunkHeader(msg)
	if err != nil {
		return ChunkHeader{}, corruptCause("chunk header", err)
	}
	if v := ch.Version(); v != version {
		return ChunkHeader{}, unknownKind(fmt.Sprintf("chunk format version %d in a file of version %d", v, version))
	}
	h := ChunkHeader{Bytes: ch.ByteLength()}
	hash, err := ch.Hash()
	if err != nil {
		return ChunkHeader{}, corruptCause("chunk hash", err)
	}
	switch {
	case len(hash) != len(h.Hash):
		return ChunkHeader{}, corrupt(fmt.Sprintf("hash of %d bytes, want %d", len(hash), len(h.Hash)))
	case h.Bytes == 0:
		return ChunkHeader{}, corrupt("header declares no content")
	case h.Bytes%chunkUnit != 0:
		return ChunkHeader{}, corrupt(fmt.Sprintf("header declares %d bytes, not a multiple of %d", h.Bytes, chunkUnit))
	case h.Bytes > lim.MaxChunkBytes:
		return ChunkHeader{}, tooLarge(fmt.Sprintf("header declares %d bytes, limit %d", h.Bytes, lim.MaxChunkBytes))
	}
	copy(h.Hash[:], hash)
	return h, nil
}
