package frames

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wire "github.com/framectl/framectl/capnp"
)

// laneSpec describes a lane of a test manifest: pages pages of pageSize
// bytes (random, compressible) cut into chunks of chunkPages.
type laneSpec struct {
	lane       uint32
	pageSize   int
	pages      int
	chunkPages uint32
}

// testBucket is a manifest's chunk objects by key, and its lanes' bytes.
type testBucket struct {
	chunks map[string][]byte
	lanes  [][]byte
}

// cutManifest builds a manifest the way a writer does: each lane's bytes
// cut into chunks of chunkPages, each chunk written with WriteChunk.
func cutManifest(t testing.TB, a Actor, epoch Epoch, seq Seq, pred Lineage, specs ...laneSpec) (Manifest, testBucket) {
	t.Helper()
	m := Manifest{Epoch: epoch, Seq: seq, CommitTime: 1_700_000_000_000_000_000 + int64(seq), Predecessor: pred}
	tb := testBucket{chunks: map[string][]byte{}}
	for i, s := range specs {
		content, sum := testLane(uint64(10+i), s.pageSize, s.pages)
		l := ManifestLane{Lane: s.lane, Kind: LaneSQLitePages, PageSize: uint32(s.pageSize), Pages: uint32(s.pages),
			Checksum: sum, ChunkPages: s.chunkPages}
		if s.pages == 0 {
			l.Checksum = 0
		}
		for first := 0; first < s.pages; first += int(s.chunkPages) {
			n := min(int(s.chunkPages), s.pages-first)
			var buf bytes.Buffer
			h, stored, err := WriteChunk(&buf, content[first*s.pageSize:(first+n)*s.pageSize], WriteOptions{})
			require.NoError(t, err)
			tb.chunks[a.ChunkKey(h.Hash)] = buf.Bytes()
			l.Chunks = append(l.Chunks, ChunkRef{FirstPage: uint32(first + 1), Pages: uint32(n), Hash: h.Hash, StoredSize: stored})
		}
		m.Lanes = append(m.Lanes, l)
		tb.lanes = append(tb.lanes, content)
	}
	return m, tb
}

func encodeManifest(t testing.TB, m Manifest) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteManifest(&buf, m, WriteOptions{}))
	return buf.Bytes()
}

var manifestActor = Actor{Namespace: NamespaceID("", "manifests"), Actor: "0a0b"}

func sampleManifest(t testing.TB) (Manifest, testBucket) {
	return cutManifest(t, manifestActor, 9, 1234, Lineage{Epoch: 7, Seq: 1200},
		laneSpec{lane: 0, pageSize: 512, pages: 10, chunkPages: 4},  // 4, 4, 2
		laneSpec{lane: 1, pageSize: 4096, pages: 0, chunkPages: 16}, // empty
		laneSpec{lane: 3, pageSize: 1024, pages: 6, chunkPages: 3},  // 3, 3
	)
}

func TestManifestRoundTrip(t *testing.T) {
	m, tb := sampleManifest(t)
	data := encodeManifest(t, m)
	key := manifestActor.SnapshotKey(m.Epoch, m.Seq)
	got, err := ReadManifest(bytes.NewReader(data), key, Limits{})
	require.NoError(t, err)
	require.Equal(t, m, got)

	// OpenSnapshot tells it from a full snapshot.
	sr, om, err := OpenSnapshot(bytes.NewReader(data), key, Limits{})
	require.NoError(t, err)
	require.Nil(t, sr)
	require.Equal(t, m, *om)

	// What the manifest names rebuilds every lane: each chunk read under
	// the key its reference names, with the size its range has, lands at
	// its first page, and the lane has the checksum the manifest declares.
	for i, l := range got.Lanes {
		var lane []byte
		for _, c := range l.Chunks {
			ck := manifestActor.ChunkKey(c.Hash)
			obj, ok := tb.chunks[ck]
			require.True(t, ok, "lane %d: chunk %s missing", l.Lane, ck)
			require.Equal(t, uint64(len(obj)), c.StoredSize, "stored size")
			require.Equal(t, uint64(len(lane)), uint64(c.FirstPage-1)*uint64(l.PageSize), "offset")
			_, content, err := ReadChunk(bytes.NewReader(obj), ck, uint64(c.Pages)*uint64(l.PageSize), nil, Limits{})
			require.NoError(t, err)
			lane = append(lane, content...)
		}
		require.True(t, bytes.Equal(tb.lanes[i], lane), "lane %d rebuilt", l.Lane)
		require.Equal(t, l.Bytes(), uint64(len(lane)))
		sum, _, err := DatabaseChecksum(bytes.NewReader(lane), int(l.PageSize))
		require.NoError(t, err)
		require.Equal(t, l.Checksum, sum, "lane %d checksum", l.Lane)
	}

	// A new database's first manifest: no lineage, no commits, no pages.
	empty := Manifest{Epoch: 1, Lanes: []ManifestLane{{Lane: 0, Kind: LaneSQLitePages, PageSize: 4096, ChunkPages: 64}}}
	got, err = ReadManifest(bytes.NewReader(encodeManifest(t, empty)), manifestActor.SnapshotKey(1, 0), Limits{})
	require.NoError(t, err)
	require.Equal(t, empty, got)
}

// The key must agree; it is compared once the manifest verified.
func TestManifestKey(t *testing.T) {
	m, _ := sampleManifest(t)
	data := encodeManifest(t, m)
	for _, k := range []string{manifestActor.SnapshotKey(9, 1235), manifestActor.SnapshotKey(8, 1234)} {
		_, err := ReadManifest(bytes.NewReader(data), k, Limits{})
		requireNamed(t, err, ErrCorrupt, k, "manifest under "+k)
		var mm *KeyMismatchError
		require.ErrorAs(t, err, &mm)
		require.Equal(t, Epoch(9), mm.Epoch)
		require.Equal(t, Seq(1234), mm.LastSeq)
		_, _, err = OpenSnapshot(bytes.NewReader(data), k, Limits{})
		require.ErrorAs(t, err, &mm, "OpenSnapshot")
	}
	ck := manifestActor.ChunkKey(SumChunk(nil))
	_, err := ReadManifest(bytes.NewReader(data), ck, Limits{})
	requireNamed(t, err, ErrInvalid, ck, "chunk key")
	_, err = ReadManifest(bytes.NewReader(data), "manifest.gz", Limits{})
	require.NoError(t, err, "a name that is not a key is not compared")
}

// A bucket written before manifests existed still restores: OpenSnapshot
// reads a full snapshot (the golden one of format version 1) as before.
// Each reader that knows one format refuses the other naming its version,
// and a version neither knows is refused by both.
func TestSnapshotOrManifest(t *testing.T) {
	hdr, lane := goldenSnapshot()
	full, err := readGolden("snapshot-v1.gz")
	require.NoError(t, err)
	key := manifestActor.SnapshotKey(hdr.Epoch, hdr.Seq)
	sr, m, err := OpenSnapshot(bytes.NewReader(full), key, Limits{})
	require.NoError(t, err)
	require.Nil(t, m)
	require.Equal(t, fmt.Sprint(hdr), fmt.Sprint(sr.Header()))
	_, r, err := sr.NextLane()
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.True(t, bytes.Equal(lane, got), "lane bytes")
	_, _, err = sr.NextLane()
	require.Equal(t, io.EOF, err)

	_, err = ReadManifest(bytes.NewReader(full), key, Limits{})
	requireNamed(t, err, ErrUnknownKind, key, "ReadManifest of a full snapshot")
	assert.Contains(t, err.Error(), "format version 1")

	mf, _ := sampleManifest(t)
	mkey := manifestActor.SnapshotKey(mf.Epoch, mf.Seq)
	_, err = NewSnapshotReader(bytes.NewReader(encodeManifest(t, mf)), mkey, Limits{})
	requireNamed(t, err, ErrUnknownKind, mkey, "NewSnapshotReader of a manifest")
	assert.Contains(t, err.Error(), "format version 2")

	// Version 3, in either struct's layout: refused by every reader.
	v3 := sealed(t, snapshotHeaderBytesVersion(t, hdr, 3), lane)
	_, _, err = OpenSnapshot(bytes.NewReader(v3), key, Limits{})
	requireNamed(t, err, ErrUnknownKind, key, "OpenSnapshot of version 3")
	assert.Contains(t, err.Error(), "format version 3")
	_, err = ReadManifest(bytes.NewReader(v3), key, Limits{})
	requireNamed(t, err, ErrUnknownKind, key, "ReadManifest of version 3")
	_, err = NewSnapshotReader(bytes.NewReader(v3), key, Limits{})
	requireNamed(t, err, ErrUnknownKind, key, "NewSnapshotReader of version 3")
}

func snapshotHeaderBytesVersion(t testing.TB, hdr Snapshot, version uint16) []byte {
	t.Helper()
	msg, seg, _ := newMessage(256)
	sh, _ := wire.NewRootSnapshotHeader(seg)
	sh.SetVersion(version)
	sh.SetEpoch(uint64(hdr.Epoch))
	sh.SetSeq(uint64(hdr.Seq))
	return marshal(t, msg)
}

func smallManifest(t testing.TB) ([]byte, string) {
	m, _ := cutManifest(t, manifestActor, 2, 10, Lineage{Epoch: 1, Seq: 8}, laneSpec{lane: 0, pageSize: 512, pages: 3, chunkPages: 2})
	return encodeManifest(t, m), manifestActor.SnapshotKey(2, 10)
}

func TestManifestEveryByteFlipDetected(t *testing.T) {
	data, key := smallManifest(t)
	t.Logf("sample manifest: %d bytes", len(data))
	everyByteFlip(t, "", data, func(b []byte) error {
		_, err := ReadManifest(bytes.NewReader(b), key, Limits{})
		return err
	})
	everyByteFlip(t, "OpenSnapshot: ", data, func(b []byte) error {
		_, _, err := OpenSnapshot(bytes.NewReader(b), key, Limits{})
		return err
	})
}

func TestManifestEveryTruncationDetected(t *testing.T) {
	data, key := smallManifest(t)
	for cut := 0; cut < len(data); cut++ {
		_, err := ReadManifest(bytes.NewReader(data[:cut]), key, Limits{})
		checkDamage(t, fmt.Sprintf("cut at %d", cut), err)
		_, _, err = OpenSnapshot(bytes.NewReader(data[:cut]), key, Limits{})
		checkDamage(t, fmt.Sprintf("OpenSnapshot: cut at %d", cut), err)
	}
	_, err := ReadManifest(bytes.NewReader(append(bytes.Clone(data), 0)), key, Limits{})
	checkDamage(t, "trailing byte", err)
}

// manifestMsg encodes m as the writer would, without validating it.
func manifestMsg(t testing.TB, m Manifest) []byte {
	t.Helper()
	msg, seg, _ := newMessage(1024)
	require.NoError(t, buildManifest(seg, &m))
	return marshal(t, msg)
}

// Manifests the writer refuses to make, each sealed so that only the rule
// under test can refuse them, and refused by WriteManifest as ErrInvalid.
func TestManifestStructureEnforced(t *testing.T) {
	base, _ := sampleManifest(t)
	edit := func(f func(m *Manifest)) Manifest {
		m := base
		m.Lanes = nil
		for _, l := range base.Lanes {
			l.Chunks = append([]ChunkRef(nil), l.Chunks...)
			m.Lanes = append(m.Lanes, l)
		}
		f(&m)
		return m
	}
	lane0 := func(f func(l *ManifestLane)) Manifest { return edit(func(m *Manifest) { f(&m.Lanes[0]) }) }
	for name, c := range map[string]struct {
		m    Manifest
		want error
	}{
		"gap between chunks":       {lane0(func(l *ManifestLane) { l.Chunks[1].FirstPage = 6 }), ErrCorrupt},
		"overlapping chunks":       {lane0(func(l *ManifestLane) { l.Chunks[1].FirstPage = 4 }), ErrCorrupt},
		"chunks out of order":      {lane0(func(l *ManifestLane) { l.Chunks[0], l.Chunks[1] = l.Chunks[1], l.Chunks[0] }), ErrCorrupt},
		"first chunk at page 0":    {lane0(func(l *ManifestLane) { l.Chunks[0].FirstPage = 0 }), ErrCorrupt},
		"short chunk not last":     {lane0(func(l *ManifestLane) { l.Chunks[0].Pages = 3 }), ErrCorrupt},
		"last chunk too long":      {lane0(func(l *ManifestLane) { l.Chunks[2].Pages = 3 }), ErrCorrupt},
		"chunk missing":            {lane0(func(l *ManifestLane) { l.Chunks = l.Chunks[:2] }), ErrCorrupt},
		"chunk extra":              {lane0(func(l *ManifestLane) { l.Chunks = append(l.Chunks, l.Chunks[2]) }), ErrCorrupt},
		"pages past the chunks":    {lane0(func(l *ManifestLane) { l.Pages = 11 }), ErrCorrupt},
		"fewer pages than chunks":  {lane0(func(l *ManifestLane) { l.Pages = 8 }), ErrCorrupt},
		"chunks of 0 pages":        {lane0(func(l *ManifestLane) { l.ChunkPages = 0 }), ErrCorrupt},
		"chunks past the limit":    {lane0(func(l *ManifestLane) { l.ChunkPages = DefaultMaxChunkBytes/512 + 1 }), ErrTooLarge},
		"pages past SQLite's":      {lane0(func(l *ManifestLane) { l.Pages = MaxDatabasePages + 1 }), ErrCorrupt},
		"bad page size":            {lane0(func(l *ManifestLane) { l.PageSize = 1000 }), ErrCorrupt},
		"unknown lane kind":        {lane0(func(l *ManifestLane) { l.Kind = 2 }), ErrUnknownKind},
		"stored size too small":    {lane0(func(l *ManifestLane) { l.Chunks[0].StoredSize = 10 }), ErrCorrupt},
		"stored size too large":    {lane0(func(l *ManifestLane) { l.Chunks[0].StoredSize = 1 << 40 }), ErrCorrupt},
		"empty lane with checksum": {edit(func(m *Manifest) { m.Lanes[1].Checksum = 5 }), ErrCorrupt},
		"lanes unsorted":           {edit(func(m *Manifest) { m.Lanes[0], m.Lanes[2] = m.Lanes[2], m.Lanes[0] }), ErrCorrupt},
		"lanes repeated":           {edit(func(m *Manifest) { m.Lanes[1].Lane = 0 }), ErrCorrupt},
		"lineage seq of no epoch":  {edit(func(m *Manifest) { m.Predecessor = Lineage{Seq: 3} }), ErrCorrupt},
		"predecessor not older":    {edit(func(m *Manifest) { m.Predecessor.Epoch = m.Epoch }), ErrCorrupt},
		"continued past its seq":   {edit(func(m *Manifest) { m.Predecessor.Seq = m.Seq + 1 }), ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			key := manifestActor.SnapshotKey(c.m.Epoch, c.m.Seq)
			_, err := ReadManifest(bytes.NewReader(sealed(t, manifestMsg(t, c.m))), key, Limits{})
			requireNamed(t, err, c.want, key, name)
			err = WriteManifest(io.Discard, c.m, WriteOptions{})
			require.ErrorIs(t, err, ErrInvalid, "WriteManifest")
		})
	}
}

// Objects that are not one manifest message and the seal, and claims that
// exceed the limits, are refused before anything is allocated for them.
func TestManifestBounds(t *testing.T) {
	m, _ := sampleManifest(t)
	good := manifestMsg(t, m)
	key := manifestActor.SnapshotKey(m.Epoch, m.Seq)
	for name, c := range map[string]struct {
		data []byte
		lim  Limits
		want error
	}{
		"no message":            {sealed(t), Limits{}, ErrCorrupt},
		"two messages":          {sealed(t, good, good), Limits{}, ErrCorrupt},
		"trailing content":      {sealed(t, good, []byte{0}), Limits{}, ErrCorrupt},
		"message claims 2 GiB":  {sealed(t, segmentTable(1<<28), good), Limits{}, ErrTooLarge},
		"past MaxManifestSize":  {sealed(t, good), Limits{MaxManifestSize: 256}, ErrTooLarge},
		"past MaxSnapshotBytes": {sealed(t, good), Limits{MaxSnapshotBytes: 4096}, ErrTooLarge},
		"past MaxLanes":         {sealed(t, good), Limits{MaxLanes: 2}, ErrTooLarge},
		"past MaxChunkBytes":    {sealed(t, good), Limits{MaxChunkBytes: 1024}, ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, err = ReadManifest(bytes.NewReader(c.data), key, c.lim) })
			requireNamed(t, err, c.want, key, name)
			assert.Less(t, alloc, uint64(1<<20), "allocated refusing it")
		})
	}
}

// Lanes whose pointers share one chunk list decode as many lists as lanes;
// the references are counted across lanes, so a small message cannot
// make the decoder allocate more than it holds.
func TestManifestSharedChunkListRefused(t *testing.T) {
	const lanes, refs = 1000, 1000
	msg, seg, _ := newMessage(128 << 10)
	mh, _ := wire.NewRootManifest(seg)
	mh.SetVersion(wire.ManifestFormatVersion)
	mh.SetEpoch(1)
	ll, _ := mh.NewLanes(lanes)
	cl, err := ll.At(0).NewChunks(refs)
	require.NoError(t, err)
	for j := range refs {
		require.NoError(t, cl.At(j).SetHash(make([]byte, 32)))
	}
	for i := 1; i < lanes; i++ {
		require.NoError(t, ll.At(i).SetChunks(cl))
	}
	data := sealed(t, marshal(t, msg))
	t.Logf("%d lanes sharing a list of %d references: %d-byte object", lanes, refs, len(data))
	key := manifestActor.SnapshotKey(1, 0)
	var rerr error
	alloc := allocated(func() { _, rerr = ReadManifest(bytes.NewReader(data), key, Limits{MaxLanes: lanes}) })
	requireNamed(t, rerr, ErrTooLarge, key, "shared chunk lists")
	assert.Less(t, alloc, uint64(8<<20), "allocated refusing it (%v)", rerr)
}

// A failure of the underlying reader is passed through, not called damage.
func TestManifestReaderErrorsPassThrough(t *testing.T) {
	data, key := smallManifest(t)
	boom := errors.New("connection reset")
	for _, cut := range []int{0, 5, 60, len(data) - 20} {
		r := io.MultiReader(bytes.NewReader(data[:cut]), &failingReader{boom})
		_, err := ReadManifest(r, key, Limits{})
		require.ErrorIs(t, err, boom, "cut %d", cut)
		require.NotErrorIs(t, err, ErrCorrupt, "cut %d: a network error was reported as damage", cut)
		require.NotErrorIs(t, err, ErrTruncated, "cut %d: a network error was reported as damage", cut)
	}
}

// WriteManifest refuses what no default reader would accept.
func TestWriteManifestRefusesOversize(t *testing.T) {
	// 1.3 million chunk references: more than DefaultMaxManifestSize.
	l := ManifestLane{Kind: LaneSQLitePages, PageSize: 512, ChunkPages: 1, Pages: 1_300_000}
	l.Chunks = make([]ChunkRef, l.Pages)
	for i := range l.Chunks {
		l.Chunks[i] = ChunkRef{FirstPage: uint32(i + 1), Pages: 1, StoredSize: 600}
	}
	l.Checksum = 1
	err := WriteManifest(io.Discard, Manifest{Epoch: 1, Lanes: []ManifestLane{l}}, WriteOptions{})
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestDefaultChunkPages(t *testing.T) {
	for ps := uint32(512); ps <= 65536; ps *= 2 {
		n := DefaultChunkPages(ps)
		require.Equal(t, uint64(DefaultChunkBytes), uint64(n)*uint64(ps), "page size %d", ps)
		require.LessOrEqual(t, uint64(n)*uint64(ps), uint64(DefaultMaxChunkBytes), "page size %d", ps)
	}
}

// TestManifestHeader: the header a manifest describes is the one a full
// snapshot of the same lanes declares.
func TestManifestHeader(t *testing.T) {
	m, tb := sampleManifest(t)
	h := m.Header()
	require.Equal(t, m.Epoch, h.Epoch)
	require.Equal(t, m.Seq, h.Seq)
	require.Equal(t, m.CommitTime, h.CommitTime)
	require.Len(t, h.Lanes, len(m.Lanes))
	for i, l := range h.Lanes {
		ml := m.Lanes[i]
		require.Equal(t, SnapshotLane{Lane: ml.Lane, Kind: ml.Kind, PageSize: ml.PageSize, Bytes: uint64(len(tb.lanes[i])), Checksum: ml.Checksum}, l)
	}
}
