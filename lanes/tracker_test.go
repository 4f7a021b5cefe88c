package lanes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// TestTracker follows random writes, truncations and growth and compares
// with the checksum recomputed from the bytes.
func TestTracker(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		ps := uint32(512) << rng.IntN(4)
		tr, err := NewTracker(ps)
		require.NoError(t, err)
		m := &modelLane{pageSize: ps}
		page := make([]byte, ps)
		for i := 0; i < 200; i++ {
			switch rng.IntN(5) {
			case 0:
				n := uint32(rng.IntN(40))
				require.NoError(t, tr.Resize(n))
				m.resize(n)
			default:
				pgno := 1 + uint32(rng.IntN(int(m.pages())+4))
				for j := range page {
					page[j] = byte(rng.IntN(3))
				}
				require.NoError(t, tr.Write(pgno, page))
				m.write(pgno, page)
			}
			if tr.Pages() != m.pages() || tr.Checksum() != m.checksum() {
				t.Fatalf("seed %d step %d: tracker %d pages %s, model %d pages %s",
					seed, i, tr.Pages(), tr.Checksum(), m.pages(), m.checksum())
			}
		}
		got, err := TrackFile(t.Context(), bytes.NewReader(m.data), ps)
		require.NoError(t, err)
		if got.Pages() != tr.Pages() || got.Checksum() != tr.Checksum() {
			t.Fatalf("TrackFile: %d pages %s, want %d %s", got.Pages(), got.Checksum(), tr.Pages(), tr.Checksum())
		}
		// Both trackers continue alike: TrackFile filled the table too.
		for pgno := uint32(1); pgno <= got.Pages(); pgno++ {
			require.Equal(t, tr.pageHash(pgno), got.pageHash(pgno), "page %d hash differs", pgno)
		}
	}
}

func TestTrackFileLarge(t *testing.T) {
	// Spans several copy buffers, ends in a partial one.
	data := make([]byte, 3*copyBufferSize+5*4096)
	for i := range data {
		data[i] = byte(i * 7 >> 5)
	}
	tr, err := TrackFile(t.Context(), bytes.NewReader(data), 4096)
	require.NoError(t, err)
	want, n, err := frames.DatabaseChecksum(bytes.NewReader(data), 4096)
	if err != nil || tr.Checksum() != want || tr.Pages() != n {
		t.Fatalf("TrackFile %d pages %s, want %d %s (%v)", tr.Pages(), tr.Checksum(), n, want, err)
	}
}

func TestTrackFileErrors(t *testing.T) {
	_, err := TrackFile(t.Context(), bytes.NewReader(make([]byte, 4096+100)), 4096)
	require.ErrorIs(t, err, ErrCorrupt, "partial page")
	_, err = TrackFile(t.Context(), bytes.NewReader(nil), 1000)
	require.ErrorIs(t, err, ErrCorrupt, "page size 1000")
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(make([]byte, 8192)), errReader{boom})
	_, err = TrackFile(t.Context(), r, 4096)
	require.ErrorIs(t, err, boom, "read")
	tr, err := TrackFile(t.Context(), bytes.NewReader(nil), 4096)
	require.NoError(t, err, "empty file")
	require.Equal(t, uint32(0), tr.Pages(), "empty file")
	require.Equal(t, frames.Checksum(0), tr.Checksum(), "empty file")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = TrackFile(ctx, bytes.NewReader(make([]byte, 4096)), 4096)
	require.Error(t, err, "cancelled context ignored")
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestTrackerPageSize(t *testing.T) {
	var tr Tracker
	require.NoError(t, tr.SetPageSize(1024))
	require.NoError(t, tr.Write(1, make([]byte, 1024)))
	wantErr(t, tr.SetPageSize(2048), ErrCorrupt)
	if err := tr.Resize(0); err != nil || tr.Checksum() != 0 {
		t.Fatalf("empty tracker has checksum %s (%v)", tr.Checksum(), err)
	}
	require.NoError(t, tr.SetPageSize(2048))
}

// Large truncations give the table's memory back.
func TestTrackerShrink(t *testing.T) {
	tr, _ := NewTracker(512)
	for i := 0; i < 5; i++ {
		require.NoError(t, tr.Resize(tr.Pages()+MaxUnwrittenPages))
	}
	require.NoError(t, tr.Resize(10))
	if c := cap(tr.hashes); c > 1000 {
		t.Fatalf("table keeps capacity %d for 10 pages", c)
	}
	want, _, _ := frames.DatabaseChecksum(bytes.NewReader(make([]byte, 10*512)), 512)
	if tr.Checksum() != want {
		t.Fatal(fmt.Sprintf("checksum %s, want %s", tr.Checksum(), want))
	}
}
