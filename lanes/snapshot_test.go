package lanes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// buildSet applies n random frames from seed to a new Set.
func buildSet(t *testing.T, seed uint64, n int) (*Set, *gen) {
	t.Helper()
	g := newGen(seed)
	s := newTestSet(t)
	for i := 0; i < n; i++ {
		f := g.next()
		mustApply(t, s, f)
	}
	return s, g
}

func writeSnapshot(t *testing.T, s *Set, epoch frames.Epoch) ([]byte, frames.Snapshot) {
	t.Helper()
	var buf bytes.Buffer
	hdr, err := s.WriteSnapshot(t.Context(), &buf, epoch, frames.WriteOptions{})
	require.NoError(t, err)
	return buf.Bytes(), hdr
}

func loadSnapshot(t *testing.T, data []byte, key string) (*Set, error) {
	t.Helper()
	sr, err := frames.NewSnapshotReader(bytes.NewReader(data), key, frames.Limits{})
	if err != nil {
		return nil, err
	}
	s, err := LoadSnapshot(t.Context(), t.TempDir(), sr, key)
	if s != nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		s, g := buildSet(t, seed, 80)
		data, hdr := writeSnapshot(t, s, 9)
		require.Equal(t, frames.Epoch(9), hdr.Epoch, "header %+v", hdr)
		require.Equal(t, s.Seq(), hdr.Seq, "header %+v", hdr)
		require.Equal(t, s.CommitTime(), hdr.CommitTime, "header %+v", hdr)
		require.Len(t, hdr.Lanes, len(s.Lanes()), "header %+v", hdr)

		// The snapshot, read with frames alone, holds the files.
		sr, err := frames.NewSnapshotReader(bytes.NewReader(data), "snap", frames.Limits{})
		require.NoError(t, err)
		for {
			sl, r, err := sr.NextLane()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			l, _ := s.Lane(sl.Lane)
			want, _ := os.ReadFile(l.Path)
			if !bytes.Equal(got, want) || sl.Checksum != l.Checksum {
				t.Fatalf("lane %d: snapshot bytes differ from the file", sl.Lane)
			}
		}

		// Loaded, it is the same state, and the same frames apply to both.
		loaded, err := loadSnapshot(t, data, "snap")
		require.NoError(t, err)
		checkSet(t, loaded, g.m)
		if st := loaded.Stats(); st.PagesLoaded == 0 && len(data) > 1000 {
			t.Fatalf("stats %+v", st)
		}
		for i := 0; i < 40; i++ {
			f := g.next()
			mustApply(t, s, f)
			mustApply(t, loaded, f)
		}
		checkSet(t, s, g.m)
		checkSet(t, loaded, g.m)
		a, _ := writeSnapshot(t, s, 10)
		b, _ := writeSnapshot(t, loaded, 10)
		if !bytes.Equal(a, b) {
			t.Fatal("snapshots of equal states differ")
		}
	}
}

// An empty lane with no page size yet is written with DefaultPageSize and
// still takes any page size after loading.
func TestSnapshotEmptyLane(t *testing.T) {
	s := newTestSet(t)
	mustApply(t, s, initialize(1, 0), frames.Frame{FirstSeq: 2, LastSeq: 2, Lane: 4, Kind: frames.KindNewLane, NewLane: frames.LaneSQLitePages})
	data, hdr := writeSnapshot(t, s, 1)
	require.Len(t, hdr.Lanes, 2, "header %+v", hdr)
	require.Equal(t, uint32(DefaultPageSize), hdr.Lanes[1].PageSize, "header %+v", hdr)
	require.Equal(t, uint64(0), hdr.Lanes[1].Bytes, "header %+v", hdr)
	loaded, err := loadSnapshot(t, data, "snap")
	require.NoError(t, err)
	m := &modelLane{}
	mustApply(t, loaded, pagesFrame(3, 4, m, 65536, 2, map[uint32]byte{1: 1}))
	checkSet(t, loaded, &model{lanes: map[uint32]*modelLane{0: {}, 4: m}, seq: 3, time: 30})
}

// A snapshot of a Set at Seq 0 with no lanes is valid and loads empty.
func TestSnapshotNoLanes(t *testing.T) {
	data, _ := writeSnapshot(t, newTestSet(t), 1)
	loaded, err := loadSnapshot(t, data, "snap")
	require.NoError(t, err)
	if loaded.Seq() != 0 || len(loaded.Lanes()) != 0 {
		t.Fatalf("loaded %d lanes at %d", len(loaded.Lanes()), loaded.Seq())
	}
}

func TestLoadSnapshotDamaged(t *testing.T) {
	s, _ := buildSet(t, 7, 60)
	data, _ := writeSnapshot(t, s, 3)
	key := frames.Actor{Namespace: frames.NamespaceID("", "n"), Actor: "ab"}.SnapshotKey(3, s.Seq())
	for _, at := range []int{len(data) / 3, len(data) / 2, len(data) - 20, len(data) - 1} {
		bad := bytes.Clone(data)
		bad[at] ^= 0x10
		dir := t.TempDir()
		sr, err := frames.NewSnapshotReader(bytes.NewReader(bad), key, frames.Limits{})
		if err == nil {
			var loaded *Set
			loaded, err = LoadSnapshot(t.Context(), dir, sr, key)
			if loaded != nil {
				t.Fatalf("byte %d flipped: snapshot loaded", at)
			}
			var e *Error
			if !errors.As(err, &e) || e.Key != key || !strings.Contains(err.Error(), key) {
				t.Fatalf("byte %d flipped: error %v does not name the key", at, err)
			}
		}
		require.Error(t, err, "byte %d flipped: no error", at)
		if files, _ := os.ReadDir(dir); len(files) != 0 {
			t.Fatalf("byte %d flipped: %d files left behind", at, len(files))
		}
	}
}

// A file changed behind the Set's back is found by VerifyFiles and refused
// by WriteSnapshot, naming the page.
func TestFileChanged(t *testing.T) {
	s := newTestSet(t)
	m := &modelLane{}
	mustApply(t, s, initialize(1, 0), pagesFrame(2, 0, m, 4096, 100, map[uint32]byte{1: 1, 50: 2, 100: 3}))
	l, _ := s.Lane(0)
	f, err := os.OpenFile(l.Path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte{9}, 49*4096+17)
	require.NoError(t, err)
	err = s.VerifyFiles(t.Context())
	wantErr(t, err, ErrChecksum)
	if !strings.Contains(err.Error(), "page 50") {
		t.Fatalf("error %q does not name page 50", err)
	}
	_, err = s.WriteSnapshot(t.Context(), io.Discard, 1, frames.WriteOptions{})
	wantErr(t, err, ErrChecksum)

	if _, err := f.WriteAt([]byte{2}, 49*4096+17); err != nil { // put it back
		t.Fatal(err)
	}
	require.NoError(t, s.VerifyFiles(t.Context()))
	require.NoError(t, f.Truncate(99*4096))
	wantErr(t, s.VerifyFiles(t.Context()), ErrChecksum)
	_, err = s.WriteSnapshot(t.Context(), io.Discard, 1, frames.WriteOptions{})
	wantErr(t, err, ErrChecksum)
}

func TestSyncAndFiles(t *testing.T) {
	s, _ := buildSet(t, 11, 50)
	require.NoError(t, s.Sync())
	var names []string
	for _, l := range s.Lanes() {
		names = append(names, filepath.Base(l.Path))
	}
	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	if len(entries) != len(names) {
		t.Fatalf("directory holds %d files, the set %d lanes (%v)", len(entries), len(names), names)
	}
}

// The replicator's path: track a database file it did not write, then
// snapshot it through a Source.
func TestWriteSnapshotSources(t *testing.T) {
	s, g := buildSet(t, 21, 60)
	main, _ := s.Lane(MainLane)
	f, err := os.Open(main.Path)
	require.NoError(t, err)
	defer f.Close()
	tr, err := TrackFile(t.Context(), f, main.PageSize)
	require.NoError(t, err)
	if tr.Checksum() != main.Checksum || tr.Pages() != main.Pages {
		t.Fatalf("TrackFile: %d pages %s, lane %d %s", tr.Pages(), tr.Checksum(), main.Pages, main.Checksum)
	}
	// The Set's own tracker is the same, and a copy.
	st, ok := s.Tracker(MainLane)
	if !ok || st.Checksum() != tr.Checksum() || st.Pages() != tr.Pages() {
		t.Fatal("Set.Tracker differs from TrackFile")
	}
	require.NoError(t, st.Write(1, make([]byte, st.PageSize())))
	l, _ := s.Lane(MainLane)
	require.Equal(t, main.Checksum, l.Checksum, "writing the copy changed the Set")
	if _, ok := s.Tracker(99); ok {
		t.Fatal("tracker of a missing lane")
	}

	var buf bytes.Buffer
	hdr, err := WriteSnapshot(t.Context(), &buf, frames.Snapshot{Epoch: 2, Seq: s.Seq(), CommitTime: s.CommitTime()},
		[]Source{{Lane: MainLane, Kind: frames.LaneSQLitePages, Tracker: tr, File: f}}, frames.WriteOptions{})
	require.NoError(t, err)
	require.Len(t, hdr.Lanes, 1, "header %+v", hdr)
	require.Equal(t, main.Checksum, hdr.Lanes[0].Checksum, "header %+v", hdr)
	loaded, err := loadSnapshot(t, buf.Bytes(), "snap")
	require.NoError(t, err)
	checkSet(t, loaded, &model{lanes: map[uint32]*modelLane{0: g.m.lanes[0]}, seq: g.m.seq, time: g.m.time})

	_, err = WriteSnapshot(t.Context(), io.Discard, frames.Snapshot{Lanes: hdr.Lanes}, nil, frames.WriteOptions{})
	require.Error(t, err, "header lanes accepted")
	_, err = WriteSnapshot(t.Context(), io.Discard, frames.Snapshot{},
		[]Source{{Lane: 1, Kind: frames.LaneSQLitePages, Tracker: tr, File: f}, {Lane: 1, Kind: frames.LaneSQLitePages, Tracker: tr, File: f}}, frames.WriteOptions{})
	require.Error(t, err, "lane given twice accepted")
}
