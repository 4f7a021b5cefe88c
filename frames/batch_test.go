package frames

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBatchRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pageSize uint32
		n        int
		partSize int
	}{
		{"small", 512, 20, 0},
		{"4k", 4096, 30, 0},
		{"64k", 65536, 8, 0},
		{"split-parts", 1024, 15, 3 * 1024}, // frames of many pages split into 3-page parts
		{"one-page-parts", 4096, 10, 1},     // a part never holds less than one page
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := sampleFrames(t, 7, 42, 100, tc.n, tc.pageSize)
			frames = append(frames, bigFrame(frames[len(frames)-1], 40))
			data := encodeBatch(t, 42, frames, WriteOptions{MaxPartBytes: tc.partSize})
			hdr, got, err := ReadBatch(bytes.NewReader(data), "", Limits{})
			require.NoError(t, err)
			require.Equal(t, Epoch(42), hdr.Epoch, "header %+v", hdr)
			require.Equal(t, Seq(100), hdr.FirstSeq, "header %+v", hdr)
			require.Equal(t, frames[len(frames)-1].LastSeq, hdr.LastSeq, "header %+v", hdr)
			framesEqual(t, got, frames)
			if tc.partSize > 0 && int(hdr.FrameCount) <= len(frames) {
				t.Fatalf("frame count %d: expected frames split into more than %d parts", hdr.FrameCount, len(frames))
			}
		})
	}
}

func TestBatchKeyMustMatchHeader(t *testing.T) {
	frames := sampleFrames(t, 1, 9, 1, 3, 512)
	data := encodeBatch(t, 9, frames, WriteOptions{})
	a := Actor{Namespace: NamespaceID("", "ns"), Actor: "ab"}
	last := frames[len(frames)-1].LastSeq
	_, _, err := ReadBatch(bytes.NewReader(data), a.LogKey(9, last), Limits{})
	require.NoError(t, err, "matching key")
	for _, key := range []string{a.LogKey(8, last), a.LogKey(9, last+1), a.SnapshotKey(9, last)} {
		_, _, err := ReadBatch(bytes.NewReader(data), key, Limits{})
		require.Error(t, err, "key %s accepted for a batch of epoch 9 ending at %d", key, last)
		require.ErrorContains(t, err, key, "the error names the key")
		// A log key that disagrees is a corrupt header, with both sides.
		var mm *KeyMismatchError
		k, _ := ParseKey(key)
		switch {
		case k.Kind != KeyLog:
		case !errors.As(err, &mm) || !errors.Is(err, ErrCorrupt):
			t.Fatalf("key %s: %v is not a *KeyMismatchError matching ErrCorrupt", key, err)
		case mm.Key != k || mm.Epoch != 9 || mm.FirstSeq != frames[0].FirstSeq || mm.LastSeq != last:
			t.Fatalf("key %s: %+v, want the header epoch 9, seq %d..%d", key, mm, frames[0].FirstSeq, last)
		}
	}
}

func TestWriteBatchRejectsInvalidFrames(t *testing.T) {
	good := sampleFrames(t, 3, 5, 10, 4, 512)
	cases := map[string]func(f []Frame) []Frame{
		"none":          func(f []Frame) []Frame { return nil },
		"wrong epoch":   func(f []Frame) []Frame { f[1].Epoch = 6; return f },
		"gap":           func(f []Frame) []Frame { f[2].FirstSeq++; f[2].LastSeq++; return f },
		"overlap":       func(f []Frame) []Frame { f[1].FirstSeq--; return f },
		"backwards":     func(f []Frame) []Frame { f[3].LastSeq = f[3].FirstSeq - 1; return f },
		"seq zero":      func(f []Frame) []Frame { return []Frame{{Epoch: 5, Kind: KindInitialize}} },
		"bad page size": func(f []Frame) []Frame { f[0].SQLite.PageSize = 1000; return f },
		"page past end": func(f []Frame) []Frame { f[0].SQLite.DatabasePages = 0; return f },
		"short page":    func(f []Frame) []Frame { f[0].SQLite.Pages[0].Data = f[0].SQLite.Pages[0].Data[:10]; return f },
		"descending": func(f []Frame) []Frame {
			p := f[0].SQLite.Pages
			f[0].SQLite.Pages = []Page{p[len(p)-1], p[0]}
			f[0].SQLite.DatabasePages = 1000
			return f
		},
		"continued":    func(f []Frame) []Frame { f[0].SQLite.Continued = true; return f },
		"unknown kind": func(f []Frame) []Frame { f[1].Kind = 99; return f },
		"unknown lane": func(f []Frame) []Frame {
			return []Frame{{Epoch: 5, FirstSeq: 1, LastSeq: 1, Kind: KindNewLane, NewLane: 7}}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			frames := mutate(cloneFrames(good))
			var buf bytes.Buffer
			_, err := WriteBatch(&buf, 5, frames, WriteOptions{})
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

// bigFrame returns a frame following prev that writes pages 1..n.
func bigFrame(prev Frame, n int) Frame {
	ps := uint32(1024)
	if prev.Kind == KindSQLitePages {
		ps = prev.SQLite.PageSize
	}
	f := Frame{Epoch: prev.Epoch, FirstSeq: prev.LastSeq + 1, LastSeq: prev.LastSeq + 5, CommitTime: prev.CommitTime + 1, Kind: KindSQLitePages}
	f.SQLite = SQLitePages{PageSize: ps, DatabasePages: uint32(n), Before: 1, After: 2}
	for i := 1; i <= n; i++ {
		f.SQLite.Pages = append(f.SQLite.Pages, Page{Number: uint32(i), Data: bytes.Repeat([]byte{byte(i)}, int(ps))})
	}
	return f
}

func cloneFrames(fs []Frame) []Frame {
	out := make([]Frame, len(fs))
	for i, f := range fs {
		f.SQLite.Pages = append([]Page(nil), f.SQLite.Pages...)
		out[i] = f
	}
	return out
}

// readAllFrames streams a batch and returns the frames it delivered and the
// final error (nil when it verified).
func readAllFrames(data []byte) (int, error) {
	br, err := NewBatchReader(bytes.NewReader(data), "do/x/log/1/00", Limits{MaxMessageSize: 1 << 20})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		_, err := br.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// A sample batch small enough to damage every byte of.
func smallBatch(t testing.TB) []byte {
	frames := sampleFrames(t, 11, 3, 1, 9, 512)
	frames[0].SQLite.Pages = frames[0].SQLite.Pages[:1]
	frames[0].SQLite.DatabasePages = 1
	return encodeBatch(t, 3, frames, WriteOptions{MaxPartBytes: 1024})
}

// everyByteFlip damages each byte of data in turn, with each bit flipped
// alone and with all of them flipped, and checks that read reports the
// damage of every damaged copy; prefix begins the messages.
func everyByteFlip(t *testing.T, prefix string, data []byte, read func(damaged []byte) error) {
	t.Helper()
	for pos := range data {
		for _, x := range []byte{0xff, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80} {
			b := bytes.Clone(data)
			b[pos] ^= x
			checkDamage(t, fmt.Sprintf("%sbyte %d ^ %#x", prefix, pos, x), read(b))
		}
	}
}

func checkDamage(t *testing.T, what string, err error) {
	t.Helper()
	require.Error(t, err, "%s: accepted", what)
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("%s: %v matches no sentinel", what, err)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.Key == "" {
		t.Fatalf("%s: %v does not name the object", what, err)
	}
}

func TestBatchEveryByteFlipDetected(t *testing.T) {
	data := smallBatch(t)
	t.Logf("sample batch: %d bytes", len(data))
	everyByteFlip(t, "", data, func(b []byte) error {
		_, err := readAllFrames(b)
		return err
	})
}

func TestBatchEveryTruncationDetected(t *testing.T) {
	data := smallBatch(t)
	for cut := 0; cut < len(data); cut++ {
		_, err := readAllFrames(data[:cut])
		checkDamage(t, fmt.Sprintf("cut at %d", cut), err)
	}
}

func TestBatchTrailingBytesRejected(t *testing.T) {
	data := smallBatch(t)
	for name, b := range map[string][]byte{
		"junk":          append(bytes.Clone(data), "junk"...),
		"second member": append(bytes.Clone(data), data...),
		"zero byte":     append(bytes.Clone(data), 0),
	} {
		_, err := readAllFrames(b)
		assert.ErrorIs(t, err, ErrCorrupt, "%s", name)
	}
}

func TestBatchEmptyObjectIsAnError(t *testing.T) {
	_, err := readAllFrames(nil)
	require.ErrorIs(t, err, ErrTruncated)
	require.ErrorContains(t, err, "empty object")
}
