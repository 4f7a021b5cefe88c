package frames

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	capnp "capnproto.org/go/capnp/v3"
	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"

	wire "github.com/framectl/framectl/capnp"
)

// The zstd chunk file (chunk format version 2), drawn under "Chunk files"
// in the package documentation: a skippable frame holding the
// ChunkHeader message, one zstd frame of the content, and a skippable
// frame holding the seal. Part of the wire format: never change them.
const (
	zstdChunkMagic = 0x184D2A50 // skippable frame 0: the header
	zstdSealMagic  = 0x184D2A5F // skippable frame 15: the seal
	zstdSealLen    = 18         // magic, size 10, "FC", xxhash64
)

// zstdChunkVersion is ChunkHeader.version in a zstd chunk file; a gzip
// chunk file holds wire.ChunkFormatVersion (1).
const zstdChunkVersion = wire.ChunkZstdFormatVersion

// zstdBound is the most a zstd frame of n content bytes occupies, with
// room to spare: zstd's own bound (zstd.h, ZSTD_COMPRESSBOUND) is
// n + n/256 + 64 KiB/2048 + its frame header and checksum.
func zstdBound(n uint64) uint64 { return n + n>>7 + 1<<10 }

// zstdEncoders recycles encoders by level, as flateWriters does DEFLATE's.
var zstdEncoders sync.Map // zstd.EncoderLevel -> *sync.Pool of *zstd.Encoder

// zstdLevel maps a DEFLATE level (WriteOptions.Level) to the zstd level a
// chunk is written at: BestSpeed and below to SpeedFastest, and so on up.
// SpeedFastest is the default because it decodes as fast as any level and
// encodes fastest (chunks' BenchmarkCodec, BENCHMARKS.md "Chunk codecs").
func zstdLevel(level int) zstd.EncoderLevel {
	switch {
	case level <= flate.BestSpeed:
		return zstd.SpeedFastest
	case level <= 5:
		return zstd.SpeedDefault
	case level < flate.BestCompression:
		return zstd.SpeedBetterCompression
	}
	return zstd.SpeedBestCompression
}

func getZstdEncoder(level zstd.EncoderLevel) (*zstd.Encoder, *sync.Pool, error) {
	p, _ := zstdEncoders.LoadOrStore(level, new(sync.Pool))
	pool := p.(*sync.Pool)
	if e, ok := pool.Get().(*zstd.Encoder); ok {
		return e, pool, nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true))
	return e, pool, err
}

// appendZstdChunk appends the zstd chunk file of content, whose header is
// h, to dst.
func appendZstdChunk(dst []byte, h ChunkHeader, content []byte, level int) ([]byte, error) {
	var hdr bytes.Buffer
	if err := writeChunkHeaderVersion(&hdr, h, zstdChunkVersion); err != nil {
		return nil, err
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, zstdChunkMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(hdr.Len()))
	dst = append(dst, hdr.Bytes()...)
	enc, pool, err := getZstdEncoder(zstdLevel(level))
	if err != nil {
		return nil, err
	}
	dst = enc.EncodeAll(content, dst)
	pool.Put(enc)
	seal := xxhash.Sum64(dst[start:])
	dst = binary.LittleEndian.AppendUint32(dst, zstdSealMagic)
	dst = binary.LittleEndian.AppendUint32(dst, zstdSealLen-8)
	dst = append(dst, 'F', 'C')
	return binary.LittleEndian.AppendUint64(dst, seal), nil
}

// zstdDecoders recycles decoders by the most they may output (a Limits'
// MaxChunkBytes): each refuses a frame that would decode to more.
var zstdDecoders sync.Map // uint64 -> *sync.Pool of *zstd.Decoder

func getZstdDecoder(max uint64) (*zstd.Decoder, *sync.Pool, error) {
	p, _ := zstdDecoders.LoadOrStore(max, new(sync.Pool))
	pool := p.(*sync.Pool)
	if d, ok := pool.Get().(*zstd.Decoder); ok {
		return d, pool, nil
	}
	// The frame's checksum is not verified: the seal covers every stored
	// byte and ReadChunk the content's SHA-256, which leave it nothing to
	// catch (it cost 2.5% of a restore's CPU). The writer still writes it,
	// for zstd -t.
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(max),
		zstd.WithDecoderMaxWindow(max), zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(true))
	return d, pool, err
}

// zstdBufs recycles the stored bytes of zstd chunks while they decode.
var zstdBufs sync.Pool // *[]byte

// readZstdChunk reads the rest of a zstd chunk file from r, whose first 4
// bytes (zstdChunkMagic) were read, and returns its header and content
// (read into dst when it has room), once the seal, the frame's checksum
// and its length verified. size is what the caller expects, as for
// ReadChunk. The hash of the content is for the caller to check.
func readZstdChunk(r io.Reader, size uint64, dst []byte, lim Limits) (ChunkHeader, []byte, error) {
	seal := xxhash.New()
	var word [4]byte
	binary.LittleEndian.PutUint32(word[:], zstdChunkMagic)
	seal.Write(word[:])
	if err := readPart(r, word[:], "its header's size"); err != nil {
		return ChunkHeader{}, nil, err
	}
	seal.Write(word[:])
	n := binary.LittleEndian.Uint32(word[:])
	if n > maxChunkHeaderSize {
		return ChunkHeader{}, nil, tooLarge(fmt.Sprintf("header frame of %d bytes, limit %d", n, maxChunkHeaderSize))
	}
	hdr := make([]byte, n)
	if err := readPart(r, hdr, "its header"); err != nil {
		return ChunkHeader{}, nil, err
	}
	seal.Write(hdr)
	msg, err := unmarshalWhole(hdr, lim)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	h, err := decodeChunkHeader(msg, lim, zstdChunkVersion)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	if size != 0 && h.Bytes != size {
		return ChunkHeader{}, nil, corrupt(fmt.Sprintf("header declares %d bytes, the manifest expects %d", h.Bytes, size))
	}
	// The frame and the seal, read whole: DecodeAll is zstd's fastest
	// decoder, and a frame of h.Bytes takes at most zstdBound of them.
	bound := zstdBound(h.Bytes) + zstdSealLen
	bp, _ := zstdBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer zstdBufs.Put(bp)
	stored, err := readAtMost(r, (*bp)[:0], bound)
	*bp = stored
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	if len(stored) < zstdSealLen {
		return ChunkHeader{}, nil, truncated("object ends before its seal")
	}
	frame, tail := stored[:len(stored)-zstdSealLen], stored[len(stored)-zstdSealLen:]
	if binary.LittleEndian.Uint32(tail) != zstdSealMagic || binary.LittleEndian.Uint32(tail[4:]) != zstdSealLen-8 || tail[8] != 'F' || tail[9] != 'C' {
		return ChunkHeader{}, nil, truncated("object does not end in its seal")
	}
	seal.Write(frame)
	if seal.Sum64() != binary.LittleEndian.Uint64(tail[10:]) {
		return ChunkHeader{}, nil, corrupt("seal mismatch: the stored bytes changed")
	}
	var zh zstd.Header
	if err := zh.Decode(frame); err != nil {
		return ChunkHeader{}, nil, corruptCause("zstd frame header", err)
	}
	switch {
	case zh.Skippable || !zh.HasFCS || !zh.HasCheckSum:
		return ChunkHeader{}, nil, corrupt("the zstd frame is not one framectl writes (a content size and a checksum)")
	case zh.FrameContentSize != h.Bytes:
		return ChunkHeader{}, nil, corrupt(fmt.Sprintf("the zstd frame holds %d bytes, the header declares %d", zh.FrameContentSize, h.Bytes))
	}
	if err := oneFrame(frame, zh.HeaderSize); err != nil {
		return ChunkHeader{}, nil, err
	}
	content := dst
	if uint64(cap(content)) < h.Bytes {
		content = make([]byte, h.Bytes)
	}
	// The capacity bounds what the decoder writes: a second frame after
	// the first has no room.
	content = content[:0:h.Bytes]
	// The capacity is the bound; the decoder's own limits only need to
	// allow it (and zstd refuses a window under 1 KiB).
	dec, pool, err := getZstdDecoder(max(lim.MaxChunkBytes, 1<<20))
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	out, err := dec.DecodeAll(frame, content)
	pool.Put(dec)
	if err != nil {
		return ChunkHeader{}, nil, corruptCause("zstd frame is damaged", err)
	}
	if uint64(len(out)) != h.Bytes {
		return ChunkHeader{}, nil, corrupt(fmt.Sprintf("content is %d bytes, its header declares %d", len(out), h.Bytes))
	}
	return h, out, nil
}

// oneFrame checks that frame, whose frame header is headerSize bytes, is
// one zstd frame and nothing after it: its blocks (RFC 8878, 3.1.1.2)
// up to the last, then the 4-byte checksum. DecodeAll would decode a
// second frame, or skip a skippable one, where the writer makes neither.
func oneFrame(frame []byte, headerSize int) error {
	at := headerSize
	for {
		if len(frame)-at < 3 {
			return corrupt("the zstd frame ends inside a block header")
		}
		bh := uint32(frame[at]) | uint32(frame[at+1])<<8 | uint32(frame[at+2])<<16
		at += 3
		last, kind, size := bh&1 == 1, (bh>>1)&3, int(bh>>3)
		switch kind {
		case 1: // RLE: one byte, repeated size times
			size = 1
		case 3:
			return corrupt("the zstd frame holds a reserved block type")
		}
		if len(frame)-at < size {
			return corrupt("the zstd frame ends inside a block")
		}
		at += size
		if last {
			break
		}
	}
	if len(frame)-at != 4 {
		return corrupt(fmt.Sprintf("%d bytes follow the zstd frame's last block, where its 4-byte checksum is", len(frame)-at))
	}
	return nil
}

// readPart fills p from r: an object that ends first is truncated, naming
// what it was to hold; the reader's own errors pass through.
func readPart(r io.Reader, p []byte, what string) error {
	_, err := io.ReadFull(r, p)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return truncated("object ends inside " + what)
	}
	return err
}

// readAtMost appends r's bytes to buf up to its end, refusing more than
// max of them.
func readAtMost(r io.Reader, buf []byte, max uint64) ([]byte, error) {
	empty := 0 // reads in a row that returned nothing: 100 are io.ErrNoProgress, as in bufio
	for {
		if uint64(len(buf)) > max {
			return buf, corrupt(fmt.Sprintf("object continues past the %d bytes its header allows", max))
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		// Read one byte past max at most, to see that the end is there.
		room := buf[len(buf):min(uint64(cap(buf)), max+1)]
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case n == 0:
			empty++
			if empty > 100 {
				return buf, io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
}

// unmarshalWhole decodes data as exactly one Cap'n Proto message, with
// msgReader's bounds.
func unmarshalWhole(data []byte, lim Limits) (*capnp.Message, error) {
	msg, size, err := newMsgReader(bytes.NewReader(data), lim).next()
	if err == io.EOF {
		return nil, corrupt("no chunk header")
	}
	if err != nil {
		return nil, err
	}
	if size != uint64(len(data)) {
		return nil, corrupt(fmt.Sprintf("header frame of %d bytes holds a message of %d", len(data), size))
	}
	return msg, nil
}
