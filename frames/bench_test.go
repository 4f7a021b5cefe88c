package frames

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
)

// Encoding and decoding throughput of batches and snapshots, per page size.
// Pages are half random, half zero, roughly like SQLite table pages.
func benchPages(pageSize, n int) []Page {
	pages := make([]Page, n)
	for i := range pages {
		d := make([]byte, pageSize)
		for j := 0; j < pageSize/2; j++ {
			d[j] = byte((i*31 + j*7) ^ (j >> 3))
		}
		pages[i] = Page{Number: uint32(i + 1), Data: d}
	}
	return pages
}

func BenchmarkWriteBatch(b *testing.B) {
	for _, ps := range []int{4096, 65536} {
		b.Run(fmt.Sprintf("pageSize=%d", ps), func(b *testing.B) {
			pages := benchPages(ps, (1<<20)/ps)
			f := []Frame{{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: KindSQLitePages,
				SQLite: SQLitePages{PageSize: uint32(ps), DatabasePages: uint32(len(pages)), Pages: pages}}}
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if _, err := WriteBatch(&buf, 1, f, WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len())/(1<<20), "ratio")
		})
	}
}

func BenchmarkReadBatch(b *testing.B) {
	for _, ps := range []int{4096, 65536} {
		b.Run(fmt.Sprintf("pageSize=%d", ps), func(b *testing.B) {
			pages := benchPages(ps, (1<<20)/ps)
			f := []Frame{{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: KindSQLitePages,
				SQLite: SQLitePages{PageSize: uint32(ps), DatabasePages: uint32(len(pages)), Pages: pages}}}
			var buf bytes.Buffer
			if _, err := WriteBatch(&buf, 1, f, WriteOptions{}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ReadBatch(bytes.NewReader(buf.Bytes()), "", Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSnapshot(b *testing.B) {
	const size = 16 << 20
	var db []byte
	for _, p := range benchPages(4096, size/4096) {
		db = append(db, p.Data...)
	}
	sum, _, _ := DatabaseChecksum(bytes.NewReader(db), 4096)
	hdr := Snapshot{Epoch: 1, Seq: 1, Lanes: []SnapshotLane{{Kind: LaneSQLitePages, PageSize: 4096, Bytes: size, Checksum: sum}}}
	var obj bytes.Buffer
	b.Run("write", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			obj.Reset()
			sw, _ := NewSnapshotWriter(&obj, hdr, WriteOptions{})
			sw.Write(db)
			if err := sw.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		buf := make([]byte, 256<<10)
		for b.Loop() {
			sr, err := NewSnapshotReader(bytes.NewReader(obj.Bytes()), "", Limits{})
			if err != nil {
				b.Fatal(err)
			}
			_, r, _ := sr.NextLane()
			if _, err := io.CopyBuffer(io.Discard, r, buf); err != nil {
				b.Fatal(err)
			}
			if _, _, err := sr.NextLane(); err != io.EOF {
				b.Fatal(err)
			}
		}
	})
}

// Encoding and decoding throughput of one chunk, per chunk size, for pages
// like benchPages' (half zero) and for incompressible pages: what chose
// DefaultChunkBytes (doc.go, "Chunk size"). A chunk pays a fixed cost per
// object (compressor, header message, hashing setup), which small chunks
// spread over fewer bytes.
func BenchmarkChunk(b *testing.B) {
	random := make([]byte, 4<<20)
	for i := range random {
		random[i] = byte(uint32(i) * 2654435761 >> 24)
	}
	rng := uint64(1)
	for i := range random {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		random[i] = byte(rng)
	}
	var tables []byte
	for _, p := range benchPages(4096, (4<<20)/4096) {
		tables = append(tables, p.Data...)
	}
	for _, data := range []struct {
		name  string
		bytes []byte
	}{{"pages=table", tables}, {"pages=random", random}} {
		for _, size := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20} {
			content := data.bytes[:size]
			name := fmt.Sprintf("%s/size=%dKiB", data.name, size>>10)
			var obj bytes.Buffer
			b.Run(name+"/write", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					obj.Reset()
					if _, _, err := WriteChunk(&obj, content, WriteOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(obj.Len())/float64(size), "ratio")
			})
			b.Run(name+"/read", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				dst := make([]byte, size)
				for b.Loop() {
					if _, _, err := ReadChunk(bytes.NewReader(obj.Bytes()), "", uint64(size), dst, Limits{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Encoding and decoding of the manifest of a 1 GiB lane, per chunk size:
// the object a session start uploads when no page changed, so its size
// ("B/manifest") is the floor of a wake's upload (doc.go, "Chunk size").
func BenchmarkManifest(b *testing.B) {
	const size = 1 << 30
	for _, chunk := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		l := ManifestLane{Kind: LaneSQLitePages, PageSize: 4096, Pages: size / 4096, Checksum: 1, ChunkPages: uint32(chunk / 4096)}
		for i := range size / chunk {
			h := SumChunk(binary.LittleEndian.AppendUint64(nil, uint64(i))) // real hashes do not compress
			l.Chunks = append(l.Chunks, ChunkRef{FirstPage: uint32(i*chunk/4096 + 1), Pages: l.ChunkPages, Hash: h, StoredSize: uint64(chunk / 2)})
		}
		m := Manifest{Epoch: 2, Seq: 100, Lanes: []ManifestLane{l}}
		var obj bytes.Buffer
		name := fmt.Sprintf("db=1GiB/chunk=%dKiB", chunk>>10)
		b.Run(name+"/write", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj.Reset()
				if err := WriteManifest(&obj, m, WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(obj.Len()), "B/manifest")
		})
		b.Run(name+"/read", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadManifest(bytes.NewReader(obj.Bytes()), "", Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
