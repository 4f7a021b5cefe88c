package dbtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPageSize(t *testing.T) {
	header := func(hi, lo byte) []byte {
		db := make([]byte, 100)
		db[16], db[17] = hi, lo
		return db
	}
	for _, tc := range []struct {
		db   []byte
		want int
	}{
		{header(0x10, 0x00), 4096},
		{header(0x02, 0x00), 512},
		{header(0x80, 0x00), 32768},
		{header(0x00, 0x01), 65536},
		{header(0x00, 0x00), 4096}, // not a database header
		{header(0x03, 0x00), 4096}, // not a power of two
		{make([]byte, 17), 4096},   // too short
	} {
		assert.Equal(t, tc.want, PageSize(tc.db), "header bytes %x: page size", tc.db[16:min(18, len(tc.db))])
	}
}

// recorder keeps what SameBytes reports instead of stopping the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestSameBytes(t *testing.T) {
	want := make([]byte, 3*4096)
	want[16], want[17] = 0x10, 0x00
	got := bytes.Clone(want)
	r := &recorder{TB: t}
	SameBytes(r, "equal", got, want)
	require.Equal(t, "", r.failed, "equal images reported")
	got[2*4096+7] = 1
	SameBytes(r, "third page", got, want)
	assert.Equal(t, "third page: 12288 bytes vs 12288, first difference at byte 8199 (page 3 of 4096 bytes)", r.failed, "reported")
	r.failed = ""
	SameBytes(r, "short", want[:4096], want)
	assert.Equal(t, "short: 4096 bytes vs 12288, first difference at byte 4096 (page 2 of 4096 bytes)", r.failed, "reported")
}
