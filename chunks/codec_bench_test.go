package chunks_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fixture"
)

// BenchmarkCodec measures, for the chunks of real SQLite databases,
// DEFLATE at frames.DefaultLevel (the codec of gzip chunk files, which
// framectl wrote before zstd ones) against zstd at three levels:
// compressed ratio, and decode and encode MB/s of chunk content
// (b.SetBytes), one core, each coder reused across chunks as a restore
// (decode) or a compaction (encode) reuses its pooled ones. It is the
// measurement that chose zstd for chunk files (BENCHMARKS.md, "Chunk
// codecs: DEFLATE against zstd").
//
// Fixtures are cmd/framebench's restore fixtures (package
// internal/fixture) at 8 MiB. Each chunk is frames.DefaultChunkBytes of
// the file (64 pages), as Write cuts a lane.
//
// Codecs: "deflate" is klauspost's flate alone at frames.DefaultLevel
// (what inflating costs, comparable with zstd alone); "frames" is
// frames.WriteChunk and frames.ReadChunk, today's zstd chunk files with
// their header, seal and the content's SHA-256; "zstd-*" are klauspost's
// zstd EncodeAll/DecodeAll with its default frame checksum, concurrency 1.
func BenchmarkCodec(b *testing.B) {
	for _, kind := range []string{fixture.Compressible, fixture.Incompressible} {
		chunks := codecFixture(b, kind)
		var raw int64
		for _, c := range chunks {
			raw += int64(len(c))
		}
		for _, cd := range benchCodecs(b) {
			name := fmt.Sprintf("fixture=%s/codec=%s", kind, cd.name)
			objs := make([][]byte, len(chunks))
			var stored int64
			for i, c := range chunks {
				objs[i] = cd.encode(nil, c)
				stored += int64(len(objs[i]))
				if got := cd.decode(nil, objs[i], len(c)); !bytes.Equal(got, c) {
					b.Fatalf("%s: chunk %d does not round-trip", name, i)
				}
			}
			ratio := float64(stored) / float64(raw)
			b.Run(name+"/decode", func(b *testing.B) {
				b.SetBytes(int64(len(chunks[0])))
				b.ReportAllocs()
				dst := make([]byte, 0, len(chunks[0]))
				i := 0
				for b.Loop() {
					dst = cd.decode(dst[:0], objs[i%len(objs)], len(chunks[0]))
					i++
				}
				b.ReportMetric(ratio, "ratio")
			})
			b.Run(name+"/encode", func(b *testing.B) {
				b.SetBytes(int64(len(chunks[0])))
				b.ReportAllocs()
				dst := make([]byte, 0, 2*len(chunks[0]))
				i := 0
				for b.Loop() {
					dst = cd.encode(dst[:0], chunks[i%len(chunks)])
					i++
				}
				b.ReportMetric(ratio, "ratio")
			})
		}
	}
}

// codec encodes a chunk's content to dst and decodes an object to dst;
// either fails the benchmark rather than return an error.
type codec struct {
	name   string
	encode func(dst, content []byte) []byte
	decode func(dst, obj []byte, size int) []byte // size: the content's, as a manifest says
}

func benchCodecs(b *testing.B) []codec {
	out := []codec{deflateCodec(b), framesCodec(b)}
	for _, l := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		out = append(out, zstdCodec(b, l))
	}
	return out
}

// deflateCodec is raw DEFLATE at the level chunks write (frames.Level 0
// means frames.DefaultLevel), with one writer and one reader reset per
// chunk, as frames pools them.
func deflateCodec(b *testing.B) codec {
	fw, err := flate.NewWriter(io.Discard, frames.DefaultLevel)
	if err != nil {
		b.Fatal(err)
	}
	fr := flate.NewReader(bytes.NewReader(nil))
	var br bytes.Reader
	var one [1]byte
	return codec{
		name: fmt.Sprintf("deflate-%d", frames.DefaultLevel),
		encode: func(dst, content []byte) []byte {
			buf := bytes.NewBuffer(dst)
			fw.Reset(buf)
			if _, err := fw.Write(content); err != nil {
				b.Fatal(err)
			}
			if err := fw.Close(); err != nil {
				b.Fatal(err)
			}
			return buf.Bytes()
		},
		decode: func(dst, obj []byte, size int) []byte {
			br.Reset(obj)
			if err := fr.(flate.Resetter).Reset(&br, nil); err != nil {
				b.Fatal(err)
			}
			dst = slices.Grow(dst, size)[:size]
			if _, err := io.ReadFull(fr, dst); err != nil {
				b.Fatal(err)
			}
			if n, err := fr.Read(one[:]); n != 0 || err != io.EOF {
				b.Fatalf("deflate stream continues past %d bytes (%d, %v)", size, n, err)
			}
			return dst
		},
	}
}

// framesCodec is the whole chunk object as chunks writes and reads it.
func framesCodec(b *testing.B) codec {
	return codec{
		name: "frames",
		encode: func(dst, content []byte) []byte {
			buf := bytes.NewBuffer(dst)
			if _, _, err := frames.WriteChunk(buf, content, frames.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			return buf.Bytes()
		},
		decode: func(dst, obj []byte, size int) []byte {
			_, content, err := frames.ReadChunk(bytes.NewReader(obj), "", uint64(size), dst[:cap(dst)], frames.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			return content
		},
	}
}

func zstdCodec(b *testing.B, level zstd.EncoderLevel) codec {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { enc.Close(); dec.Close() })
	return codec{
		name:   "zstd-" + level.String(),
		encode: func(dst, content []byte) []byte { return enc.EncodeAll(content, dst) },
		decode: func(dst, obj []byte, _ int) []byte {
			out, err := dec.DecodeAll(obj, dst)
			if err != nil {
				b.Fatal(err)
			}
			return out
		},
	}
}

// codecFixtures holds each fixture's chunks, built once per process
// (-count runs the benchmark again).
var codecFixtures sync.Map // kind -> [][]byte

// codecFixture returns the full chunks of an 8 MiB database of the kind's
// rows, written as cmd/framebench's buildFixture writes it.
func codecFixture(b *testing.B, kind string) [][]byte {
	if c, ok := codecFixtures.Load(kind); ok {
		return c.([][]byte)
	}
	file := filepath.Join(b.TempDir(), kind+".db")
	if err := fixture.Build(file, kind, 8<<20); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	var chunks [][]byte
	for off := 0; off+frames.DefaultChunkBytes <= len(data); off += frames.DefaultChunkBytes {
		chunks = append(chunks, data[off:off+frames.DefaultChunkBytes])
	}
	if len(chunks) < 16 {
		b.Fatalf("the %s database has %d bytes: %d full chunks", kind, len(data), len(chunks))
	}
	codecFixtures.Store(kind, chunks)
	return chunks
}
