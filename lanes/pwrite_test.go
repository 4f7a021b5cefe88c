package lanes

import (
	"bytes"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

// The zero-copy path must trigger for frames as the batch reader decodes
// them; if the frames encoding changes its layout, this says so.
func TestContiguousDecoded(t *testing.T) {
	f := pagesFrame(1, 0, &modelLane{}, 4096, 64, fill(64, 0))
	var buf bytes.Buffer
	_, err := frames.WriteBatch(&buf, f.Epoch, []frames.Frame{f}, frames.WriteOptions{})
	require.NoError(t, err)
	_, got, err := frames.ReadBatch(&buf, "", frames.Limits{})
	require.NoError(t, err)
	all := contiguous(got[0].SQLite.Pages)
	if all == nil {
		t.Fatal("decoded pages are not contiguous")
	}
	for i, p := range got[0].SQLite.Pages {
		if !bytes.Equal(all[i*4096:(i+1)*4096], p.Data) {
			t.Fatalf("page %d differs in the contiguous view", p.Number)
		}
	}
}

func TestContiguous(t *testing.T) {
	arr := make([]byte, 4*512)
	page := func(i int) []byte { return arr[i*512 : (i+1)*512] }
	run := func(data ...[]byte) []frames.Page {
		var ps []frames.Page
		for i, d := range data {
			ps = append(ps, frames.Page{Number: uint32(i + 1), Data: d})
		}
		return ps
	}
	if contiguous(run(page(0), page(1), page(2))) == nil {
		t.Fatal("adjacent pages of one array not found contiguous")
	}
	for name, r := range map[string][]frames.Page{
		"gap":      run(page(0), page(2)),
		"reversed": run(page(1), page(0)),
		"separate": run(make([]byte, 512), make([]byte, 512)),
		"capped":   run(arr[0:512:512], page(1)),
	} {
		if contiguous(r) != nil {
			t.Fatalf("%s: found contiguous", name)
		}
	}
}

// fill writes pages 1..n, page p filled with byte p+add.
func fill(n uint32, add byte) map[uint32]byte {
	w := map[uint32]byte{}
	for p := uint32(1); p <= n; p++ {
		w[p] = byte(p) + add
	}
	return w
}

// Runs longer than the copy buffer, from separate allocations and from one
// array, land where they belong.
func TestLongRuns(t *testing.T) {
	const n = 3*runBufferSize/512 + 7
	s := newTestSet(t)
	m := &modelLane{}
	f2 := pagesFrame(2, 0, m, 512, n, fill(n, 0)) // separate allocations
	writes := fill(n, 1)
	delete(writes, 5)
	delete(writes, n/2)
	f3 := pagesFrame(3, 0, m, 512, n, writes)
	arr := make([]byte, 0, n*512) // the same pages, moved into one array
	for i := range f3.SQLite.Pages {
		arr = append(arr, f3.SQLite.Pages[i].Data...)
		f3.SQLite.Pages[i].Data = arr[len(arr)-512:]
	}
	mustApply(t, s, initialize(1, 0), f2, f3)
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: m}, seq: 3, time: 30})
}
