package frames

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPageHashDefinition(t *testing.T) {
	// The library is XXH64 with seed 0 (published test vector).
	require.Equal(t, uint64(0x44bc2cf5ad770999), xxhash.Sum64String("abc"), "xxhash64(abc)")
	page := bytes.Repeat([]byte{0xa5}, 512)
	var in []byte
	in = binary.BigEndian.AppendUint32(in, 7)
	in = append(in, page...)
	require.Equal(t, xxhash.Sum64(in), PageHash(7, page), "PageHash is not xxhash64(be32(pgno) || page)")
	// Pinned: frames and snapshots in buckets carry these values.
	require.Equal(t, uint64(0x7b4da580d00d4e8b), PageHash(1, make([]byte, 4096)), "PageHash(1, zeros)")
}

// The rolling checksum, updated only for the pages each step touches, always
// equals the checksum recomputed from the whole database.
func TestChecksumIncrementalMatchesFull(t *testing.T) {
	const ps = 512
	rng := rand.New(rand.NewPCG(5, 5))
	var db []byte
	var sum Checksum
	page := func(n uint32) []byte { return db[int(n-1)*ps : int(n)*ps] }
	for step := range 3000 {
		pages := uint32(len(db) / ps)
		switch op := rng.IntN(10); {
		case op < 6 && pages > 0: // overwrite a page
			n := 1 + uint32(rng.IntN(int(pages)))
			nw := make([]byte, ps)
			for i := range nw {
				nw[i] = byte(rng.IntN(3))
			}
			sum = sum.Replace(n, page(n), nw)
			copy(page(n), nw)
		case op < 8: // grow by written pages
			for range 1 + rng.IntN(4) {
				nw := make([]byte, ps)
				nw[rng.IntN(ps)] = byte(rng.Uint32())
				db = append(db, nw...)
				sum = sum.Add(uint32(len(db)/ps), nw)
			}
		case op < 9 && pages > 0: // truncate
			to := uint32(rng.IntN(int(pages)))
			for n := pages; n > to; n-- {
				sum = sum.Remove(n, page(n))
			}
			db = db[:int(to)*ps]
		default: // grow without writing: zero pages count too
			for range rng.IntN(3) {
				db = append(db, make([]byte, ps)...)
				sum = sum.Add(uint32(len(db)/ps), make([]byte, ps))
			}
		}
		full, n, err := DatabaseChecksum(bytes.NewReader(db), ps)
		require.NoError(t, err)
		require.Equal(t, uint32(len(db)/ps), n, "pages")
		require.Equal(t, full, sum, "step %d: the rolling checksum against the full one", step)
	}
	// And the empty database is 0.
	c, n, _ := DatabaseChecksum(bytes.NewReader(nil), ps)
	require.Equal(t, Checksum(0), c, "empty database")
	require.Equal(t, uint32(0), n, "empty database")
}

func TestChecksumDetectsMovedPages(t *testing.T) {
	a, b := bytes.Repeat([]byte{1}, 512), bytes.Repeat([]byte{2}, 512)
	x := Checksum(0).Add(1, a).Add(2, b)
	y := Checksum(0).Add(1, b).Add(2, a)
	if x == y {
		t.Fatal("swapping two pages left the checksum unchanged")
	}
	if Checksum(0).Add(1, a).Add(2, a) == 0 {
		t.Fatal("equal pages at different numbers cancelled")
	}
}

func TestDatabaseChecksumRejectsPartialPage(t *testing.T) {
	_, _, err := DatabaseChecksum(bytes.NewReader(make([]byte, 1000)), 512)
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = DatabaseChecksum(bytes.NewReader(nil), 1000)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestChecksumText(t *testing.T) {
	for c, want := range map[Checksum]string{
		0:                  "0000000000000000",
		0x1122334455667788: "1122334455667788",
		0xabcdef:           "0000000000abcdef",
		math.MaxUint64:     "ffffffffffffffff",
	} {
		assert.Equal(t, want, c.String(), "Checksum(%#x).String()", uint64(c))
		b, _ := c.MarshalText()
		assert.Equal(t, want, string(b), "Checksum(%#x).MarshalText()", uint64(c))
		b, err := json.Marshal(c)
		assert.NoError(t, err, "json.Marshal(Checksum(%#x))", uint64(c))
		assert.Equal(t, `"`+want+`"`, string(b), "json.Marshal(Checksum(%#x))", uint64(c))
	}
	rng := rand.New(rand.NewPCG(6, 6))
	for range 1000 {
		c := Checksum(rng.Uint64())
		got, err := ParseChecksum(c.String())
		require.NoError(t, err, "ParseChecksum(%q)", c.String())
		require.Equal(t, c, got, "ParseChecksum(%q)", c.String())
		var u Checksum
		require.NoError(t, json.Unmarshal([]byte(`"`+c.String()+`"`), &u), "json.Unmarshal(%q)", c.String())
		require.Equal(t, c, u, "json.Unmarshal(%q)", c.String())
	}
	for _, s := range []string{"", "0", "112233445566778", "11223344556677880", "1122334455667788 ",
		"112233445566778G", "11223344556677AB", "0x11223344556677", "-122334455667788", "+122334455667788"} {
		got, err := ParseChecksum(s)
		var fe *Error
		if err == nil {
			t.Errorf("ParseChecksum(%q) = %s, want an error", s, got)
		} else if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
			t.Errorf("ParseChecksum(%q): %v is not an *Error matching ErrInvalid", s, err)
		}
		u := Checksum(42)
		assert.Error(t, u.UnmarshalText([]byte(s)), "UnmarshalText(%q)", s)
		assert.Equal(t, Checksum(42), u, "UnmarshalText(%q) leaves the value unchanged", s)
	}
}
