package frames

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	capnp "capnproto.org/go/capnp/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wire "github.com/framectl/framectl/capnp"
)

// sealed wraps raw content in framectl's gzip framing, as the writer would:
// the tests below damage what is inside, not the wrapping.
func sealed(t testing.TB, content ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, err := newGzipWriter(&buf, DefaultLevel)
	require.NoError(t, err)
	for _, c := range content {
		_, err := gz.Write(c)
		require.NoError(t, err)
	}
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

func marshal(t testing.TB, msg *capnp.Message) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, writeMessage(&buf, msg))
	return buf.Bytes()
}

func headerMsg(t testing.TB, h BatchHeader, version uint16) []byte {
	t.Helper()
	msg, seg, _ := newMessage(64)
	bh, _ := wire.NewRootBatchHeader(seg)
	bh.SetVersion(version)
	bh.SetEpoch(uint64(h.Epoch))
	bh.SetFirstSeq(uint64(h.FirstSeq))
	bh.SetLastSeq(uint64(h.LastSeq))
	bh.SetFrameCount(h.FrameCount)
	return marshal(t, msg)
}

func frameMsg(t testing.TB, f Frame) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, writeFrame(&buf, &f, f.SQLite.Pages, f.SQLite.Continued))
	return buf.Bytes()
}

// A header claiming a 2 GiB segment is refused before anything is allocated
// for it, whether it is the first message or a later one.
func TestHugeSegmentClaimRejectedWithoutAllocating(t *testing.T) {
	var claim [8]byte
	binary.LittleEndian.PutUint32(claim[0:], 0)     // one segment
	binary.LittleEndian.PutUint32(claim[4:], 1<<28) // 2^28 words = 2 GiB
	good := headerMsg(t, BatchHeader{Epoch: 1, FirstSeq: 1, LastSeq: 1, FrameCount: 1}, wire.FormatVersion)
	for name, data := range map[string][]byte{
		"first message":  sealed(t, claim[:], make([]byte, 64)),
		"frame message":  sealed(t, good, claim[:], make([]byte, 64)),
		"segment count":  sealed(t, []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}),
		"second segment": sealed(t, segmentTable(1, 1<<28), make([]byte, 64)),
		"513 segments":   sealed(t, segmentTable(make([]uint32, 513)...)),
	} {
		var err error
		alloc := allocated(func() { _, err = readAllFrames(data) })
		assert.ErrorIs(t, err, ErrTooLarge, "%s", name)
		if alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes refusing it", name, alloc)
		}
		t.Logf("%s: %v (allocated %d bytes)", name, err, alloc)
	}
}

// segmentTable is the stream framing of a message whose segments have these
// sizes in words, without the segments.
func segmentTable(words ...uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(words)-1))
	for _, w := range words {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	if len(b)%8 != 0 {
		b = append(b, 0, 0, 0, 0)
	}
	return b
}

// A segment larger than Cap'n Proto's 32-bit addresses can hold is too
// large even under a limit that would allow its size, and refused before
// anything is allocated for it.
func TestSegmentPastCapnpAddressesRejected(t *testing.T) {
	data := sealed(t, segmentTable(1<<29), make([]byte, 64)) // 4 GiB
	var err error
	alloc := allocated(func() {
		_, err = NewBatchReader(bytes.NewReader(data), "b", Limits{MaxMessageSize: 1 << 40})
	})
	require.ErrorIs(t, err, ErrTooLarge)
	if alloc > 1<<20 {
		t.Fatalf("allocated %d bytes refusing it", alloc)
	}
}

// The framing allows several segments (the writer makes one): a header
// followed by one or two unused segments decodes, whichever padding the
// segment table needs.
func TestMultiSegmentMessageDecodes(t *testing.T) {
	h := BatchHeader{Epoch: 1, FirstSeq: 1, LastSeq: 1, FrameCount: 1}
	single := headerMsg(t, h, wire.FormatVersion) // table [0, words], then the segment
	seg0 := single[8:]
	for _, extra := range []int{1, 2} {
		words := []uint32{uint32(len(seg0) / 8)}
		for range extra {
			words = append(words, 1)
		}
		msg := segmentTable(words...)
		msg = append(msg, seg0...)
		msg = append(msg, make([]byte, 8*extra)...)
		data := sealed(t, msg, frameMsg(t, Frame{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: KindInitialize}))
		got, frames, err := ReadBatch(bytes.NewReader(data), "", Limits{})
		require.NoError(t, err, "%d segments", 1+extra)
		require.Equal(t, h, got, "%d segments: header", 1+extra)
		require.Len(t, frames, 1, "%d segments", 1+extra)
	}
}

func TestUnknownUnionTagRejected(t *testing.T) {
	f := Frame{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: KindInitialize}
	msg, seg, _ := newMessage(128)
	fr, _ := wire.NewRootFrame(seg)
	fr.SetEpoch(uint64(f.Epoch))
	fr.SetFirstSeq(1)
	fr.SetLastSeq(1)
	capnp.Struct(fr).SetUint16(28, 9) // the union tag kept for `write`
	data := sealed(t, headerMsg(t, BatchHeader{Epoch: 1, FirstSeq: 1, LastSeq: 1, FrameCount: 1}, wire.FormatVersion), marshal(t, msg))
	_, err := readAllFrames(data)
	require.ErrorIs(t, err, ErrUnknownKind)
}

func TestUnknownFormatVersionRejected(t *testing.T) {
	f := Frame{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: KindInitialize}
	data := sealed(t, headerMsg(t, BatchHeader{Epoch: 1, FirstSeq: 1, LastSeq: 1, FrameCount: 1}, 2), frameMsg(t, f))
	_, err := readAllFrames(data)
	require.ErrorIs(t, err, ErrUnknownKind)
}

// Frames that are well formed one by one but do not make a valid batch.
func TestBatchStructureEnforced(t *testing.T) {
	init := func(first, last Seq) Frame {
		return Frame{Epoch: 1, FirstSeq: first, LastSeq: last, Kind: KindInitialize}
	}
	pages := func(first Seq, continued bool, numbers ...uint32) Frame {
		f := Frame{Epoch: 1, FirstSeq: first, LastSeq: first, Kind: KindSQLitePages}
		f.SQLite = SQLitePages{PageSize: 512, DatabasePages: 10, Continued: continued}
		for _, n := range numbers {
			f.SQLite.Pages = append(f.SQLite.Pages, Page{Number: n, Data: make([]byte, 512)})
		}
		return f
	}
	hdr := func(first, last Seq, count uint32) []byte {
		return headerMsg(t, BatchHeader{Epoch: 1, FirstSeq: first, LastSeq: last, FrameCount: count}, wire.FormatVersion)
	}
	wrongEpoch := init(1, 1)
	wrongEpoch.Epoch = 2
	cases := map[string][][]byte{
		"no header":            {},
		"zero frames":          {hdr(1, 1, 0)},
		"fewer frames":         {hdr(1, 2, 2), frameMsg(t, init(1, 1))},
		"more frames":          {hdr(1, 1, 1), frameMsg(t, init(1, 1)), frameMsg(t, init(2, 2))},
		"gap":                  {hdr(1, 3, 2), frameMsg(t, init(1, 1)), frameMsg(t, init(3, 3))},
		"overlap":              {hdr(1, 3, 2), frameMsg(t, init(1, 2)), frameMsg(t, init(2, 3))},
		"first mismatch":       {hdr(2, 2, 1), frameMsg(t, init(1, 2))},
		"last mismatch":        {hdr(1, 3, 1), frameMsg(t, init(1, 2))},
		"past last":            {hdr(1, 1, 1), frameMsg(t, init(1, 2))},
		"wrong epoch":          {hdr(1, 1, 1), frameMsg(t, wrongEpoch)},
		"ends continued":       {hdr(1, 1, 1), frameMsg(t, pages(1, true, 1))},
		"part differs":         {hdr(1, 2, 2), frameMsg(t, pages(1, true, 1)), frameMsg(t, pages(2, false, 2))},
		"part pages backwards": {hdr(1, 1, 2), frameMsg(t, pages(1, true, 3)), frameMsg(t, pages(1, false, 2))},
		"range backwards":      {hdr(2, 1, 1), frameMsg(t, init(2, 1))},
	}
	for name, msgs := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readAllFrames(sealed(t, msgs...))
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
	// And the valid version of the continued frame is accepted.
	ok := sealed(t, hdr(1, 1, 2), frameMsg(t, pages(1, true, 1, 2)), frameMsg(t, pages(1, false, 3)))
	n, err := readAllFrames(ok)
	require.NoError(t, err, "valid continued frame")
	require.Equal(t, 2, n, "valid continued frame: messages")
	_, frames, err := ReadBatch(bytes.NewReader(ok), "", Limits{})
	if err != nil || len(frames) != 1 || len(frames[0].SQLite.Pages) != 3 || frames[0].SQLite.Continued {
		t.Fatalf("ReadBatch did not join the parts: %v %v", frames, err)
	}
}

// An object larger than MaxBatchBytes stops at the limit instead of being
// inflated to its end.
func TestDecompressedSizeCapped(t *testing.T) {
	frames := []Frame{bigFrame(Frame{Epoch: 1, LastSeq: 0}, 200)} // 200 KiB of pages
	data := encodeBatch(t, 1, frames, WriteOptions{})
	br, err := NewBatchReader(bytes.NewReader(data), "b", Limits{MaxBatchBytes: 64 << 10})
	if err == nil {
		_, err = br.Next()
	}
	require.ErrorIs(t, err, ErrTooLarge)
	_, _, err = ReadBatch(bytes.NewReader(data), "b", Limits{MaxBatchBytes: 1 << 20})
	require.NoError(t, err, "under the cap")
}

// A failure of the underlying reader is passed through, not called damage.
func TestReaderErrorsPassThrough(t *testing.T) {
	data := smallBatch(t)
	boom := errors.New("connection reset")
	for _, cut := range []int{0, 5, 300, len(data) - 20} {
		r := io.MultiReader(bytes.NewReader(data[:cut]), &failingReader{boom})
		_, err := readAllFramesFrom(r)
		require.ErrorIs(t, err, boom, "cut %d: the reader's error", cut)
		require.NotErrorIs(t, err, ErrCorrupt, "cut %d: a network error was reported as damage", cut)
		require.NotErrorIs(t, err, ErrTruncated, "cut %d: a network error was reported as damage", cut)
	}
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

func readAllFramesFrom(r io.Reader) (int, error) {
	br, err := NewBatchReader(r, "b", Limits{})
	if err != nil {
		return 0, err
	}
	for n := 0; ; n++ {
		if _, err := br.Next(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
}
