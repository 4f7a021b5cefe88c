package frames

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash"
	"hash/crc32"
	"io"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/flate"
)

// gzipHeader is the content member's header and sealTemplate the seal
// member, both drawn under "Gzip file and seal" in the package
// documentation (doc.go). Part of the wire format: never change them.
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

const gzipTrailerLen = 8

// sealLen is the size of the seal member; sealTemplate is it with a zero
// hash at sealHashAt.
const (
	sealLen    = 34
	sealHashAt = 16
)

var sealTemplate = [sealLen]byte{
	0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 12, 0, // header, FEXTRA, XLEN 12
	'F', 'C', 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, // subfield FC, LEN 8, hash
	3, 0, // empty final fixed-Huffman block
	0, 0, 0, 0, 0, 0, 0, 0, // CRC-32 and ISIZE of nothing
}

// hashWriter hashes every byte written through it.
type hashWriter struct {
	w io.Writer
	h *xxhash.Digest
}

func (hw hashWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	return n, err
}

// gzipWriter writes the content member and, on Close, the seal.
type gzipWriter struct {
	w     hashWriter
	fw    *flate.Writer
	level int
	crc   hash.Hash32
	size  uint64
	err   error
}

// flateWriters recycles compressors by level: a new one allocates and
// clears about a megabyte of tables, which showed as 5% of a replicating
// process's CPU when every small batch paid for it.
var flateWriters sync.Map // level -> *sync.Pool of *flate.Writer

func getFlateWriter(w io.Writer, level int) (*flate.Writer, error) {
	p, _ := flateWriters.LoadOrStore(level, new(sync.Pool))
	if fw, ok := p.(*sync.Pool).Get().(*flate.Writer); ok {
		fw.Reset(w)
		return fw, nil
	}
	return flate.NewWriter(w, level)
}

func putFlateWriter(fw *flate.Writer, level int) {
	fw.Reset(io.Discard) // drop the reference to the destination
	p, _ := flateWriters.LoadOrStore(level, new(sync.Pool))
	p.(*sync.Pool).Put(fw)
}

func newGzipWriter(w io.Writer, level int) (*gzipWriter, error) {
	hw := hashWriter{w: w, h: xxhash.New()}
	fw, err := getFlateWriter(hw, level)
	if err != nil {
		return nil, err
	}
	if _, err := hw.Write(gzipHeader[:]); err != nil {
		return nil, err
	}
	return &gzipWriter{w: hw, fw: fw, level: level, crc: crc32.NewIEEE()}, nil
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	g.crc.Write(p)
	g.size += uint64(len(p))
	n, err := g.fw.Write(p)
	g.err = err
	return n, err
}

// Close finishes the deflate stream and writes the trailer and the seal. It
// does not close the underlying writer.
func (g *gzipWriter) Close() error {
	if g.err != nil {
		return g.err
	}
	err := g.fw.Close()
	putFlateWriter(g.fw, g.level)
	g.fw = nil
	if err != nil {
		g.err = err
		return err
	}
	var t [gzipTrailerLen]byte
	binary.LittleEndian.PutUint32(t[0:], g.crc.Sum32())
	binary.LittleEndian.PutUint32(t[4:], uint32(g.size))
	if _, err := g.w.Write(t[:]); err != nil {
		g.err = err
		return err
	}
	seal := sealTemplate
	binary.LittleEndian.PutUint64(seal[sealHashAt:], g.w.h.Sum64())
	if _, err := g.w.w.Write(seal[:]); err != nil {
		g.err = err
		return err
	}
	g.err = errWriterClosed
	return nil
}

var errWriterClosed = errors.New("frames: writer already closed")

// gzipReader reads the content of a sealed gzip file, enforcing a cap on the
// content length. Its errors are problems (matching the package sentinels)
// except for failures of the underlying reader, which pass through
// unchanged.
type gzipReader struct {
	sr  *srcReader
	src *bufio.Reader // an io.ByteReader, so flate stops exactly at the end of its stream
	fr  io.ReadCloser
	crc hash.Hash32
	n   uint64 // content bytes returned so far
	max uint64
	err error // sticky; io.EOF once trailer and seal are verified
}

// srcReader sits under the bufio.Reader. It remembers a failure of the
// underlying reader, so that a network error is passed through as it is and
// never reported as damage, and it hashes every byte of the object except
// the last sealLen, which it holds back: when the object has been read to its
// end, the hash covers exactly what the seal must declare.
type srcReader struct {
	r    io.Reader
	err  error
	h    *xxhash.Digest
	tail [sealLen]byte
	nt   int // bytes held in tail
}

func (s *srcReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.account(p[:n])
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// account hashes the bytes that can no longer be among the last sealLen.
func (s *srcReader) account(p []byte) {
	if s.nt+len(p) <= sealLen {
		s.nt += copy(s.tail[s.nt:], p)
		return
	}
	drop := s.nt + len(p) - sealLen // oldest bytes to hash now
	if drop <= s.nt {
		s.h.Write(s.tail[:drop])
		s.nt = copy(s.tail[:], s.tail[drop:s.nt])
		s.nt += copy(s.tail[s.nt:], p)
		return
	}
	s.h.Write(s.tail[:s.nt])
	s.h.Write(p[:drop-s.nt])
	s.nt = copy(s.tail[:], p[drop-s.nt:])
}

func newGzipReader(r io.Reader, max uint64) (*gzipReader, error) {
	sr := &srcReader{r: r, h: xxhash.New()}
	src := bufio.NewReaderSize(sr, 64<<10)
	var h [len(gzipHeader)]byte
	n, err := io.ReadFull(src, h[:])
	switch {
	case sr.err != nil:
		return nil, sr.err
	case n == 0:
		return nil, truncated("empty object")
	case err != nil:
		return nil, truncated("object ends inside the gzip header")
	case h[0] != gzipHeader[0] || h[1] != gzipHeader[1]:
		return nil, corrupt("not a gzip stream")
	case h != gzipHeader:
		return nil, corrupt("gzip header differs from the one framectl writes")
	}
	g := &gzipReader{sr: sr, src: src, crc: crc32.NewIEEE(), max: max}
	if fr, ok := flateReaders.Get().(io.ReadCloser); ok {
		if err := fr.(flate.Resetter).Reset(src, nil); err == nil {
			g.fr = fr
		}
	}
	if g.fr == nil {
		g.fr = flate.NewReader(src)
	}
	return g, nil
}

// flateReaders recycles decompressors: each holds a 32 KiB window and
// Huffman tables, and a restore opens one per object (12% of its CPU went
// to allocating them across many small batches).
var flateReaders sync.Pool

// release returns the decompressor once the stream reached a final state
// (verified end, or an error): Read never touches it again.
func (g *gzipReader) release() {
	if g.fr != nil {
		flateReaders.Put(g.fr)
		g.fr = nil
	}
}

func (g *gzipReader) srcErr() error { return g.sr.err }

func (g *gzipReader) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := g.fr.Read(p)
	if n > 0 {
		g.crc.Write(p[:n])
		g.n += uint64(n)
		if g.n > g.max {
			g.err = tooLarge("decompressed content exceeds the limit")
			g.release()
			return 0, g.err
		}
	}
	if err != nil {
		defer g.release() // every path below sets g.err
	}
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		if g.err = g.finish(); g.err == nil {
			g.err = io.EOF
		}
	case g.srcErr() != nil:
		g.err = g.srcErr()
	case errors.Is(err, io.ErrUnexpectedEOF):
		g.err = truncated("object ends inside the compressed stream")
	default:
		g.err = corruptCause("compressed stream is damaged", err)
	}
	return n, g.err
}

// finish checks the trailer, the seal, and that nothing follows.
func (g *gzipReader) finish() error {
	var t [gzipTrailerLen]byte
	if _, err := io.ReadFull(g.src, t[:]); err != nil {
		if e := g.srcErr(); e != nil {
			return e
		}
		return truncated("object ends inside the gzip trailer")
	}
	if binary.LittleEndian.Uint32(t[0:]) != g.crc.Sum32() {
		return corrupt("gzip checksum mismatch")
	}
	if binary.LittleEndian.Uint32(t[4:]) != uint32(g.n) {
		return corrupt("gzip length mismatch")
	}
	var seal [sealLen]byte
	if n, err := io.ReadFull(g.src, seal[:]); err != nil {
		if e := g.srcErr(); e != nil {
			return e
		}
		if n == 0 {
			return truncated("object ends before its seal")
		}
		return truncated("object ends inside its seal")
	}
	if _, err := g.src.ReadByte(); err != io.EOF {
		if e := g.srcErr(); e != nil {
			return e
		}
		return corrupt("trailing bytes after the seal")
	}
	// The whole object has been read: the source holds back exactly the
	// seal and has hashed everything before it.
	want := sealTemplate
	binary.LittleEndian.PutUint64(want[sealHashAt:], g.sr.h.Sum64())
	if seal != want {
		got := seal
		binary.LittleEndian.PutUint64(got[sealHashAt:], 0)
		if got != sealTemplate {
			return corrupt("seal member differs from the one framectl writes")
		}
		return corrupt("seal hash mismatch: the stored bytes were altered")
	}
	return nil
}

// verifyEnd reads what is left of the stream and reports whether it ended
// exactly where the content should have: no more content, valid trailer and
// seal.
func (g *gzipReader) verifyEnd() error {
	var b [1]byte
	n, err := io.ReadFull(g, b[:])
	if n > 0 {
		return corrupt("content continues past its declared end")
	}
	if err == io.EOF {
		return nil
	}
	return err
}
