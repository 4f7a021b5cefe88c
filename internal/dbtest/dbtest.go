// Package dbtest compares SQLite database images in tests (where two
// images first differ, by byte and by page), and runs the few SQL steps
// the tests of several packages share (sql.go). It is for tests only:
// nothing outside a _test.go file imports it.
package dbtest

import (
	"bytes"
	"testing"
)

// SameBytes fails the test unless got and want are the same bytes. The
// message says what was compared, both sizes, and the first byte that
// differs with the page it falls in (by the page size want declares).
func SameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	n := 0
	for n < min(len(got), len(want)) && got[n] == want[n] {
		n++
	}
	ps := PageSize(want)
	t.Fatalf("%s: %d bytes vs %d, first difference at byte %d (page %d of %d bytes)", what, len(got), len(want), n, n/ps+1, ps)
}

// PageSize returns the page size a database image's header declares
// (bytes 16 and 17, big-endian, where 1 stands for 65536: SQLite's
// fileformat.html), or 4096 when the image is too short to say or declares
// no valid size.
func PageSize(db []byte) int {
	if len(db) < 18 {
		return 4096
	}
	ps := int(db[16])<<8 | int(db[17])
	switch {
	case ps == 1:
		return 65536
	case ps < 512 || ps&(ps-1) != 0:
		return 4096
	}
	return ps
}
