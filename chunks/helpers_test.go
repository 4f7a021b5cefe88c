package chunks_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/stretchr/testify/require"
)

var testActor = frames.Actor{Namespace: frames.NamespaceID("", "chunks-test"), Actor: frames.ActorKey([]byte{0xc4})}

// lane is one lane's file and tracker, changed together.
type lane struct {
	num      uint32
	pageSize uint32
	f        *os.File
	t        *lanes.Tracker
	data     []byte // what the file holds
}

// newLane makes a lane of pages pages of pageSize bytes in dir: random
// pages, with every seventh page a copy of page 1 and, when the lane has
// three chunks or more, its third chunk a copy of its first, so that two
// chunks share one object.
func newLane(t *testing.T, dir string, num, pageSize, pages uint32, seed uint64) *lane {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(num)))
	data := make([]byte, int(pages)*int(pageSize))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	ps := int(pageSize)
	for p := 7; p < int(pages); p += 7 {
		copy(data[p*ps:(p+1)*ps], data[:ps])
	}
	if c := int(frames.DefaultChunkPages(pageSize)) * ps; len(data) >= 3*c {
		copy(data[2*c:3*c], data[:c])
	}
	l := &lane{num: num, pageSize: pageSize, data: data}
	path := filepath.Join(dir, "lane-"+string(rune('a'+num))+".db")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	l.f = f
	tr, err := lanes.TrackFile(t.Context(), bytes.NewReader(data), pageSize)
	require.NoError(t, err)
	l.t = tr
	return l
}

// write overwrites page pgno (1-based) in the file and the tracker.
func (l *lane) write(t *testing.T, pgno uint32, page []byte) {
	t.Helper()
	off := int(pgno-1) * int(l.pageSize)
	copy(l.data[off:], page)
	_, err := l.f.WriteAt(page, int64(off))
	require.NoError(t, err)
	require.NoError(t, l.t.Write(pgno, page))
}

func (l *lane) source() lanes.Source {
	return lanes.Source{Lane: l.num, Kind: frames.LaneSQLitePages, Tracker: l.t, File: l.f}
}

func sources(ls ...*lane) []lanes.Source {
	var out []lanes.Source
	for _, l := range ls {
		out = append(out, l.source())
	}
	return out
}

// chunkKeys lists the actor's chunk keys.
func chunkKeys(t *testing.T, b bucket.Bucket) []string {
	t.Helper()
	return buckettest.Keys(t, b, testActor.ChunkPrefix())
}

// checkLoaded compares the Set's lanes with the lanes written.
func checkLoaded(t *testing.T, s *lanes.Set, want ...*lane) {
	t.Helper()
	got := s.Lanes()
	require.Len(t, got, len(want))
	for i, l := range want {
		require.Equal(t, l.num, got[i].Number)
		data, err := os.ReadFile(got[i].Path)
		require.NoError(t, err)
		if !bytes.Equal(data, l.data) {
			t.Fatalf("lane %d: the loaded file (%d bytes) differs from the one written (%d bytes)", l.num, len(data), len(l.data))
		}
		require.Equal(t, l.t.Checksum(), got[i].Checksum)
	}
	require.NoError(t, s.VerifyFiles(t.Context()))
}

// recorder wraps a real bucket and records the keys put, in order; a key
// matching fail is refused.
type recorder struct {
	bucket.Bucket
	mu   sync.Mutex
	puts []string
	fail func(key string) bool
}

var errRefused = errors.New("refused by the test")

func (r *recorder) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if r.fail != nil && r.fail(key) {
		return bucket.Info{}, &bucket.Error{Op: "put", Key: key, Err: errRefused}
	}
	info, err := r.Bucket.Put(ctx, key, body, size, cond)
	if err == nil {
		r.mu.Lock()
		r.puts = append(r.puts, key)
		r.mu.Unlock()
	}
	return info, err
}

func (r *recorder) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.puts)
}

func isChunkKey(k string) bool { return strings.HasPrefix(k, testActor.ChunkPrefix()) }
