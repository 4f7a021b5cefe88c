package chunks_test

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/stretchr/testify/require"
)

// readLog is a lane file that records the pages read from it.
type readLog struct {
	io.ReaderAt
	pageSize int64
	mu       sync.Mutex
	pages    map[int64]bool // 1-based
}

func (r *readLog) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	for pg := off / r.pageSize; pg < (off+int64(len(p))+r.pageSize-1)/r.pageSize; pg++ {
		r.pages[pg+1] = true
	}
	r.mu.Unlock()
	return r.ReaderAt.ReadAt(p, off)
}

// With Options.Prior, a chunk whose fingerprint the tracker gives again is
// named without reading its pages: a write after one page changed reads
// that page's chunk alone, and the manifest is exactly what a write that
// reads everything makes. Fingerprints are recorded and read back.
func TestWriteNamesUnchangedChunksUnread(t *testing.T) {
	b := buckettest.Dir(t)
	ls := threeLanes(t)
	w1, err := chunks.Write(t.Context(), b, testActor, start, sources(ls...), nil, chunks.Options{})
	require.NoError(t, err)
	for _, l := range w1.Manifest.Lanes {
		for i, c := range l.Chunks {
			require.NotZero(t, c.Fingerprint, "lane %d chunk %d records no fingerprint", l.Lane, i)
		}
	}
	require.Equal(t, w1.Manifest, *buckettest.Manifest(t, b, w1.Key))

	// One page of lane 0's second chunk (pages 65..128) changes.
	ls[0].write(t, 70, bytes.Repeat([]byte{0xab}, 4096))
	logs := make([]*readLog, len(ls))
	srcs := sources(ls...)
	for i := range srcs {
		logs[i] = &readLog{ReaderAt: srcs[i].File, pageSize: int64(ls[i].pageSize), pages: map[int64]bool{}}
		srcs[i].File = logs[i]
	}
	next := start
	next.Seq = 43
	w2, err := chunks.Write(t.Context(), b, testActor, next, srcs, chunks.HaveOf(&w1.Manifest), chunks.Options{Prior: &w1.Manifest})
	require.NoError(t, err)
	require.Equal(t, 1, w2.Chunks)
	require.Equal(t, 7, w2.Unread, "every chunk but the changed one named unread")
	for i, lg := range logs {
		for pg := range lg.pages {
			if i != 0 || pg < 65 || pg > 128 {
				t.Errorf("lane %d page %d read: its chunk did not change", ls[i].num, pg)
			}
		}
	}

	// What a write that reads every page makes instead.
	next.Seq = 44
	w3, err := chunks.Write(t.Context(), b, testActor, next, sources(ls...), chunks.HaveOf(&w1.Manifest), chunks.Options{})
	require.NoError(t, err)
	require.Zero(t, w3.Unread)
	require.Equal(t, w3.Manifest.Lanes, w2.Manifest.Lanes)

	// A prior chunk of another range or page size is never taken for this
	// one, even with the same fingerprint.
	other := w1.Manifest
	other.Lanes = []frames.ManifestLane{w1.Manifest.Lanes[0]}
	other.Lanes[0].Lane = 1
	other.Lanes[0].Chunks = []frames.ChunkRef{w1.Manifest.Lanes[0].Chunks[0]}
	other.Lanes[0].Chunks[0].Fingerprint = ls[1].t.Fingerprint(1, frames.DefaultChunkPages(512))
	w4, err := chunks.Write(t.Context(), b, testActor, next, []lanes.Source{ls[1].source()}, nil, chunks.Options{Prior: &other})
	require.NoError(t, err)
	require.Zero(t, w4.Unread)
	require.NotEqual(t, other.Lanes[0].Chunks[0].Hash, w4.Manifest.Lanes[0].Chunks[0].Hash)
}
