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
)

func TestPageHashDefinition(t *testing.T) {
	// The library is XXH64 with seed 0 (published test vector).
	if got := xxhash.Sum64String("abc"); got != 0x44bc2cf5ad770999 {
		t.Fatalf("xxhash64(abc) = %#x", got)
	}
	page := bytes.Repeat([]byte{0xa5}, 512)
	var in []byte
	in = binary.BigEndian.AppendUint32(in, 7)
	in = append(in, page...)
	if PageHash(7, page) != xxhash.Sum64(in) {
		t.Fatal("PageHash is not xxhash64(be32(pgno) || page)")
	}
	// Pinned: frames and snapshots in buckets carry these values.
	if got := PageHash(1, make([]byte, 4096)); got != 0x7b4da580d00d4e8b {
		t.Fatalf("PageHash(1, zeros) = %#x", got)
	}
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
		if err != nil || n != uint32(len(db)/ps) {
			t.Fatal(n, err)
		}
		if full != sum {
			t.Fatalf("step %d: rolling %s, full %s", step, sum, full)
		}
	}
	// And the empty database is 0.
	if c, n, _ := DatabaseChecksum(bytes.NewReader(nil), ps); c != 0 || n != 0 {
		t.Fatal(c, n)
	}
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
	if !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	if _, _, err := DatabaseChecksum(bytes.NewReader(nil), 1000); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}

func TestChecksumText(t *testing.T) {
	for c, want := range map[Checksum]string{
		0:                  "0000000000000000",
		0x1122334455667788: "1122334455667788",
		0xabcdef:           "0000000000abcdef",
		math.MaxUint64:     "ffffffffffffffff",
	} {
		if c.String() != want {
			t.Errorf("Checksum(%#x).String() = %q, want %q", uint64(c), c.String(), want)
		}
		if b, _ := c.MarshalText(); string(b) != want {
			t.Errorf("Checksum(%#x).MarshalText() = %q, want %q", uint64(c), b, want)
		}
		if b, err := json.Marshal(c); err != nil || string(b) != `"`+want+`"` {
			t.Errorf("json.Marshal(Checksum(%#x)) = %s, %v", uint64(c), b, err)
		}
	}
	rng := rand.New(rand.NewPCG(6, 6))
	for range 1000 {
		c := Checksum(rng.Uint64())
		got, err := ParseChecksum(c.String())
		if err != nil || got != c {
			t.Fatalf("ParseChecksum(%q) = %s, %v", c.String(), got, err)
		}
		var u Checksum
		if err := json.Unmarshal([]byte(`"`+c.String()+`"`), &u); err != nil || u != c {
			t.Fatalf("json.Unmarshal(%q) = %s, %v", c.String(), u, err)
		}
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
		if err := u.UnmarshalText([]byte(s)); err == nil || u != 42 {
			t.Errorf("UnmarshalText(%q) = %s, %v: want an error and the value unchanged", s, u, err)
		}
	}
}
