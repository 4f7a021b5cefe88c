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
)

// TestTracker follows random writes, truncations and growth and compares
// with the checksum recomputed from the bytes.
func TestTracker(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		ps := uint32(512) << rng.IntN(4)
		tr, err := NewTracker(ps)
		if err != nil {
			t.Fatal(err)
		}
		m := &modelLane{pageSize: ps}
		page := make([]byte, ps)
		for i := 0; i < 200; i++ {
			switch rng.IntN(5) {
			case 0:
				n := uint32(rng.IntN(40))
				if err := tr.Resize(n); err != nil {
					t.Fatal(err)
				}
				m.resize(n)
			default:
				pgno := 1 + uint32(rng.IntN(int(m.pages())+4))
				for j := range page {
					page[j] = byte(rng.IntN(3))
				}
				if err := tr.Write(pgno, page); err != nil {
					t.Fatal(err)
				}
				m.write(pgno, page)
			}
			if tr.Pages() != m.pages() || tr.Checksum() != m.checksum() {
				t.Fatalf("seed %d step %d: tracker %d pages %s, model %d pages %s",
					seed, i, tr.Pages(), tr.Checksum(), m.pages(), m.checksum())
			}
		}
		got, err := TrackFile(t.Context(), bytes.NewReader(m.data), ps)
		if err != nil {
			t.Fatal(err)
		}
		if got.Pages() != tr.Pages() || got.Checksum() != tr.Checksum() {
			t.Fatalf("TrackFile: %d pages %s, want %d %s", got.Pages(), got.Checksum(), tr.Pages(), tr.Checksum())
		}
		// Both trackers continue alike: TrackFile filled the table too.
		for pgno := uint32(1); pgno <= got.Pages(); pgno++ {
			if got.pageHash(pgno) != tr.pageHash(pgno) {
				t.Fatalf("page %d hash differs", pgno)
			}
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
	if err != nil {
		t.Fatal(err)
	}
	want, n, err := frames.DatabaseChecksum(bytes.NewReader(data), 4096)
	if err != nil || tr.Checksum() != want || tr.Pages() != n {
		t.Fatalf("TrackFile %d pages %s, want %d %s (%v)", tr.Pages(), tr.Checksum(), n, want, err)
	}
}

func TestTrackFileErrors(t *testing.T) {
	if _, err := TrackFile(t.Context(), bytes.NewReader(make([]byte, 4096+100)), 4096); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("partial page: %v", err)
	}
	if _, err := TrackFile(t.Context(), bytes.NewReader(nil), 1000); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("page size 1000: %v", err)
	}
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(make([]byte, 8192)), errReader{boom})
	if _, err := TrackFile(t.Context(), r, 4096); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
	tr, err := TrackFile(t.Context(), bytes.NewReader(nil), 4096)
	if err != nil || tr.Pages() != 0 || tr.Checksum() != 0 {
		t.Fatalf("empty file: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := TrackFile(ctx, bytes.NewReader(make([]byte, 4096)), 4096); err == nil {
		t.Fatal("cancelled context ignored")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestTrackerPageSize(t *testing.T) {
	var tr Tracker
	if err := tr.SetPageSize(1024); err != nil {
		t.Fatal(err)
	}
	if err := tr.Write(1, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, tr.SetPageSize(2048), ErrCorrupt)
	if err := tr.Resize(0); err != nil || tr.Checksum() != 0 {
		t.Fatalf("empty tracker has checksum %s (%v)", tr.Checksum(), err)
	}
	if err := tr.SetPageSize(2048); err != nil {
		t.Fatal(err)
	}
}

// Large truncations give the table's memory back.
func TestTrackerShrink(t *testing.T) {
	tr, _ := NewTracker(512)
	for i := 0; i < 5; i++ {
		if err := tr.Resize(tr.Pages() + MaxUnwrittenPages); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Resize(10); err != nil {
		t.Fatal(err)
	}
	if c := cap(tr.hashes); c > 1000 {
		t.Fatalf("table keeps capacity %d for 10 pages", c)
	}
	want, _, _ := frames.DatabaseChecksum(bytes.NewReader(make([]byte, 10*512)), 512)
	if tr.Checksum() != want {
		t.Fatal(fmt.Sprintf("checksum %s, want %s", tr.Checksum(), want))
	}
}
