package frames

import (
	"bytes"
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
