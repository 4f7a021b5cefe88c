package lanes

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/framectl/framectl/frames"
)

// decoded returns the frames as a batch reader hands them out: every page's
// data inside the decoded message, consecutive pages adjacent in memory.
func decoded(b *testing.B, fs [2]frames.Frame) [2]frames.Frame {
	for v := range fs {
		f := fs[v]
		f.FirstSeq, f.LastSeq = 1, 1
		var buf bytes.Buffer
		if _, err := frames.WriteBatch(&buf, 0, []frames.Frame{f}, frames.WriteOptions{MaxPartBytes: 2 << 20}); err != nil {
			b.Fatal(err)
		}
		_, got, err := frames.ReadBatch(&buf, "", frames.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		fs[v] = got[0]
	}
	return fs
}

// BenchmarkApply applies 1 MiB frames that overwrite a database's pages,
// alternating between two versions of them so that the checksum chain
// holds. "consecutive" writes one run of pages (a bulk update); "scattered"
// writes every other page of a database twice as large, so no two pages
// are adjacent (one pwrite per page).
func BenchmarkApply(b *testing.B) {
	for _, ps := range []int{4096, 65536} {
		for _, layout := range []string{"consecutive", "decoded", "scattered"} {
			b.Run(fmt.Sprintf("pageSize=%d/%s", ps, layout), func(b *testing.B) {
				n, stride := (1<<20)/ps, 1
				if layout == "scattered" {
					stride = 2
				}
				size := uint32(n * stride)
				m := &modelLane{pageSize: uint32(ps)}
				m.resize(size)
				zero := m.checksum()
				var versions [2]frames.Frame
				for v := range versions {
					f := frames.Frame{Kind: frames.KindSQLitePages, SQLite: frames.SQLitePages{
						PageSize: uint32(ps), DatabasePages: size, Before: m.checksum()}}
					for i := 0; i < n; i++ {
						d := make([]byte, ps)
						for j := 0; j < ps/2; j++ { // half random, half zero, like table pages
							d[j] = byte((i*31 + j*7 + v) ^ (j >> 3))
						}
						pgno := uint32(1 + i*stride)
						f.SQLite.Pages = append(f.SQLite.Pages, frames.Page{Number: pgno, Data: d})
						m.write(pgno, d)
					}
					f.SQLite.After = m.checksum()
					versions[v] = f
				}
				if layout == "decoded" {
					versions = decoded(b, versions)
				}

				s := newTestSet(b)
				grow := frames.Frame{FirstSeq: 2, LastSeq: 2, Kind: frames.KindSQLitePages,
					SQLite: frames.SQLitePages{PageSize: uint32(ps), DatabasePages: size, After: zero}}
				first := versions[0]
				first.FirstSeq, first.LastSeq = 3, 3
				mustApply(b, s, initialize(1, 0), grow, first)
				// From now on version 0 applies over version 1.
				versions[0].SQLite.Before = versions[1].SQLite.After

				seq := frames.Seq(4)
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				for b.Loop() {
					f := &versions[(seq+1)%2] // version 1 at seq 4
					f.FirstSeq, f.LastSeq = seq, seq
					if err := s.Apply(f); err != nil {
						b.Fatal(err)
					}
					seq++
				}
			})
		}
	}
}
