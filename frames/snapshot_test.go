package frames

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testLane returns n pages of pageSize bytes and their checksum.
func testLane(seed uint64, pageSize, n int) ([]byte, Checksum) {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, pageSize*n)
	for i := range b {
		b[i] = byte(rng.IntN(8))
	}
	c, _, err := DatabaseChecksum(bytes.NewReader(b), pageSize)
	if err != nil {
		panic(err)
	}
	return b, c
}

func encodeSnapshot(t testing.TB, hdr Snapshot, lanes ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	sw, err := NewSnapshotWriter(&buf, hdr, WriteOptions{})
	require.NoError(t, err)
	for _, l := range lanes {
		// Odd-sized writes: the writer must hash pages that arrive in pieces.
		for len(l) > 0 {
			n := min(len(l), 777)
			_, err := sw.Write(l[:n])
			require.NoError(t, err)
			l = l[n:]
		}
	}
	require.NoError(t, sw.Close())
	return buf.Bytes()
}

// readSnapshot reads every lane and returns their bytes, or the error.
func readSnapshot(data []byte, key string) (Snapshot, [][]byte, error) {
	sr, err := NewSnapshotReader(bytes.NewReader(data), key, Limits{})
	if err != nil {
		return Snapshot{}, nil, err
	}
	var out [][]byte
	for {
		_, r, err := sr.NextLane()
		if err == io.EOF {
			return sr.Header(), out, nil
		}
		if err != nil {
			return Snapshot{}, nil, err
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return Snapshot{}, nil, err
		}
		out = append(out, b)
	}
}

func sampleSnapshot(t testing.TB, pageSize, pages int) (Snapshot, [][]byte) {
	l0, c0 := testLane(1, pageSize, pages)
	l2, c2 := testLane(2, 1024, 3)
	hdr := Snapshot{Epoch: 7, Seq: 1234, CommitTime: 99, Lanes: []SnapshotLane{
		{Lane: 0, Kind: LaneSQLitePages, PageSize: uint32(pageSize), Bytes: uint64(len(l0)), Checksum: c0},
		{Lane: 1, Kind: LaneSQLitePages, PageSize: 4096}, // empty
		{Lane: 2, Kind: LaneSQLitePages, PageSize: 1024, Bytes: uint64(len(l2)), Checksum: c2},
	}}
	return hdr, [][]byte{l0, nil, l2}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, ps := range []int{512, 4096, 65536} {
		t.Run(fmt.Sprint(ps), func(t *testing.T) {
			hdr, lanes := sampleSnapshot(t, ps, 5)
			data := encodeSnapshot(t, hdr, lanes...)
			a := Actor{Namespace: NamespaceID("", "n"), Actor: "00ff"}
			got, gotLanes, err := readSnapshot(data, a.SnapshotKey(7, 1234))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint(hdr), fmt.Sprint(got), "header")
			for i := range lanes {
				if !bytes.Equal(gotLanes[i], lanes[i]) {
					t.Fatalf("lane %d differs", i)
				}
			}
			// The key must agree with the header.
			_, _, err = readSnapshot(data, a.SnapshotKey(7, 1235))
			var mm *KeyMismatchError
			require.ErrorIs(t, err, ErrCorrupt, "mismatched key")
			require.ErrorAs(t, err, &mm, "mismatched key")
			require.Equal(t, Epoch(7), mm.Epoch, "mismatched key")
			require.Equal(t, Seq(1234), mm.LastSeq, "mismatched key")
			require.Equal(t, Seq(1235), mm.Key.Seq, "mismatched key")
		})
	}
}

// Skipping a lane without reading it still verifies it.
func TestSnapshotSkippedLaneVerified(t *testing.T) {
	hdr, lanes := sampleSnapshot(t, 512, 4)
	hdr.Lanes[0].Checksum ^= 1
	var buf bytes.Buffer
	sw, _ := NewSnapshotWriter(&buf, hdr, WriteOptions{})
	sw.Write(lanes[0])
	require.ErrorIs(t, sw.Close(), ErrInvalid, "writer accepted bytes that do not match the declared checksum")
	// Build the bad object anyway, as a damaged writer might, and read it
	// skipping lane 0.
	bad := sealed(t, snapshotHeaderBytes(t, hdr), lanes[0], lanes[2])
	sr, err := NewSnapshotReader(bytes.NewReader(bad), "s", Limits{})
	require.NoError(t, err)
	sr.NextLane()
	_, _, err = sr.NextLane()
	require.ErrorIs(t, err, ErrCorrupt, "the skipped lane")
}

func snapshotHeaderBytes(t testing.TB, hdr Snapshot) []byte {
	var buf bytes.Buffer
	require.NoError(t, writeSnapshotHeader(&buf, &hdr))
	return buf.Bytes()
}

func TestSnapshotWriterEnforcesLengths(t *testing.T) {
	hdr, lanes := sampleSnapshot(t, 512, 2)
	var buf bytes.Buffer
	sw, _ := NewSnapshotWriter(&buf, hdr, WriteOptions{})
	sw.Write(lanes[0][:100])
	require.ErrorIs(t, sw.Close(), ErrInvalid, "short lane")
	sw, _ = NewSnapshotWriter(&buf, hdr, WriteOptions{})
	sw.Write(lanes[0])
	sw.Write(lanes[2])
	_, err := sw.Write([]byte{1})
	require.ErrorIs(t, err, ErrInvalid, "extra byte")
	for name, h := range map[string]Snapshot{
		"unsorted lanes": {Lanes: []SnapshotLane{{Lane: 2, Kind: LaneSQLitePages, PageSize: 512}, {Lane: 1, Kind: LaneSQLitePages, PageSize: 512}}},
		"partial page":   {Lanes: []SnapshotLane{{Lane: 0, Kind: LaneSQLitePages, PageSize: 512, Bytes: 100}}},
		"bad page size":  {Lanes: []SnapshotLane{{Lane: 0, Kind: LaneSQLitePages, PageSize: 3}}},
		"unknown kind":   {Lanes: []SnapshotLane{{Lane: 0, Kind: 9, PageSize: 512}}},
	} {
		_, err := NewSnapshotWriter(&buf, h, WriteOptions{})
		assert.ErrorIs(t, err, ErrInvalid, "%s", name)
	}
}

func smallSnapshot(t testing.TB) []byte {
	l0, c0 := testLane(3, 512, 2)
	hdr := Snapshot{Epoch: 2, Seq: 10, Lanes: []SnapshotLane{{Lane: 0, Kind: LaneSQLitePages, PageSize: 512, Bytes: 1024, Checksum: c0}}}
	return encodeSnapshot(t, hdr, l0)
}

func TestSnapshotEveryByteFlipDetected(t *testing.T) {
	data := smallSnapshot(t)
	t.Logf("sample snapshot: %d bytes", len(data))
	everyByteFlip(t, "", data, func(b []byte) error {
		_, _, err := readSnapshot(b, "snap")
		return err
	})
}

func TestSnapshotEveryTruncationDetected(t *testing.T) {
	data := smallSnapshot(t)
	for cut := 0; cut < len(data); cut++ {
		_, _, err := readSnapshot(data[:cut], "snap")
		checkDamage(t, fmt.Sprintf("cut at %d", cut), err)
	}
	_, _, err := readSnapshot(append(bytes.Clone(data), 0), "snap")
	checkDamage(t, "trailing byte", err)
}

// zeroReader yields n mostly-zero bytes without holding them: the first
// byte of every 4 KiB page numbers it, so pages differ and the checksum means
// something.
type zeroReader struct{ n, off int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.n)]
	for i := range p {
		if o := z.off + int64(i); o%4096 == 0 {
			p[i] = byte(o>>12) | 1
		} else {
			p[i] = 0
		}
	}
	z.n -= int64(len(p))
	z.off += int64(len(p))
	return len(p), nil
}

// A 100 MiB snapshot streams through both directions with memory bounded
// far below its size.
func TestSnapshot100MiBStreamsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the 100 MiB streaming test")
	}
	const size = 100 << 20
	sum, pages, err := DatabaseChecksum(&zeroReader{n: size}, 4096)
	require.NoError(t, err)
	require.Equal(t, uint32(size/4096), pages)
	hdr := Snapshot{Epoch: 1, Seq: 5, Lanes: []SnapshotLane{{Lane: 0, Kind: LaneSQLitePages, PageSize: 4096, Bytes: size, Checksum: sum}}}

	var compressed bytes.Buffer
	writeAlloc := allocated(func() {
		sw, err := NewSnapshotWriter(&compressed, hdr, WriteOptions{})
		require.NoError(t, err)
		_, err = io.CopyBuffer(sw, &zeroReader{n: size}, make([]byte, 64<<10))
		require.NoError(t, err)
		require.NoError(t, sw.Close())
	})
	compressedLen := compressed.Len()
	var n int64
	readAlloc := allocated(func() {
		sr, err := NewSnapshotReader(bytes.NewReader(compressed.Bytes()), "s", Limits{})
		require.NoError(t, err)
		_, r, err := sr.NextLane()
		require.NoError(t, err)
		n, err = io.CopyBuffer(io.Discard, r, make([]byte, 64<<10))
		require.NoError(t, err)
		if _, _, err := sr.NextLane(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	})
	t.Logf("100 MiB snapshot: %d bytes compressed; allocated %d KiB writing (excluding the output buffer's growth), %d KiB reading",
		compressedLen, writeAlloc>>10, readAlloc>>10)
	require.Equal(t, int64(size), n, "bytes read")
	// The output buffer holds the compressed object (about 1 MiB here) and
	// grows by doubling; everything else must be small.
	if limit := uint64(8 << 20); writeAlloc > limit+4*uint64(compressedLen) {
		t.Fatalf("writing allocated %d bytes", writeAlloc)
	}
	if limit := uint64(8 << 20); readAlloc > limit {
		t.Fatalf("reading allocated %d bytes for a %d-byte snapshot", readAlloc, size)
	}
}
