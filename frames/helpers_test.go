package frames

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleFrames builds a contiguous run of frames of every kind from a seed.
// pageSize 512 keeps samples small enough for exhaustive damage tests.
func sampleFrames(t testing.TB, seed uint64, epoch Epoch, first Seq, n int, pageSize uint32) []Frame {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var frames []Frame
	seq := first
	var sum Checksum
	dbPages := uint32(0)
	for i := 0; i < n; i++ {
		f := Frame{Epoch: epoch, FirstSeq: seq, Lane: 0, CommitTime: int64(1_700_000_000_000_000_000 + i)}
		span := Seq(1 + rng.IntN(3))
		f.LastSeq = seq + span - 1
		seq += span
		switch i % 7 {
		case 3:
			f.Kind = KindInitialize
			sum, dbPages = 0, 0
		case 5:
			f.Kind = KindNewLane
			f.NewLane = LaneSQLitePages
			f.Lane = 1
		case 6:
			f.Kind = KindDeleteLane
			f.Lane = 1
		default:
			f.Kind = KindSQLitePages
			newSize := dbPages + uint32(rng.IntN(3))
			if newSize == 0 {
				newSize = 1
			}
			p := &f.SQLite
			p.PageSize, p.DatabasePages, p.Before = pageSize, newSize, sum
			for pg := uint32(1); pg <= newSize; pg++ {
				if rng.IntN(2) == 0 && pg <= dbPages {
					continue
				}
				data := make([]byte, pageSize)
				for j := range data {
					data[j] = byte(rng.IntN(4)) // compressible, like real pages
				}
				p.Pages = append(p.Pages, Page{Number: pg, Data: data})
			}
			// The checksum here is not the real chain (old contents are not
			// tracked); frames only checks that it is carried intact.
			sum = Checksum(rng.Uint64())
			p.After = sum
			dbPages = newSize
		}
		frames = append(frames, f)
	}
	return frames
}

func encodeBatch(t testing.TB, epoch Epoch, frames []Frame, opts WriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := WriteBatch(&buf, epoch, frames, opts)
	require.NoError(t, err)
	return buf.Bytes()
}

func framesEqual(t testing.TB, got, want []Frame) {
	t.Helper()
	require.Len(t, got, len(want), "frames")
	for i := range want {
		g, w := &got[i], &want[i]
		require.Equal(t, w.String(), g.String(), "frame %d: got %v, want %v", i, g, w)
		require.Equal(t, w.CommitTime, g.CommitTime, "frame %d: got %v, want %v", i, g, w)
		for j := range w.SQLite.Pages {
			if g.SQLite.Pages[j].Number != w.SQLite.Pages[j].Number || !bytes.Equal(g.SQLite.Pages[j].Data, w.SQLite.Pages[j].Data) {
				t.Fatalf("frame %d page %d differs", i, j)
			}
		}
	}
}

// allocated returns the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
