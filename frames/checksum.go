package frames

import (
	"encoding/binary"
	"io"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// Checksum is a rolling database checksum, defined under "Rolling checksum"
// in the package documentation (doc.go). In text (String, MarshalText, and
// so JSON) it is 16 lowercase hex digits.
type Checksum uint64

// String returns c as 16 lowercase hex digits.
func (c Checksum) String() string { return string(c.appendHex(nil)) }

func (c Checksum) appendHex(dst []byte) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[c>>shift&15])
	}
	return dst
}

// ParseChecksum parses what String returns: exactly 16 lowercase hex
// digits.
func ParseChecksum(s string) (Checksum, error) {
	if len(s) != 16 {
		return 0, &Error{Object: "checksum", Key: strconv.Quote(s), Err: invalid("not 16 hex digits")}
	}
	var c Checksum
	for i := 0; i < len(s); i++ {
		d := hexValue(s[i])
		if d == 255 {
			return 0, &Error{Object: "checksum", Key: strconv.Quote(s), Err: invalid("not lowercase hex")}
		}
		c = c<<4 | Checksum(d)
	}
	return c, nil
}

// MarshalText returns c as String does.
func (c Checksum) MarshalText() ([]byte, error) { return c.appendHex(make([]byte, 0, 16)), nil }

// UnmarshalText parses what MarshalText returns (ParseChecksum).
func (c *Checksum) UnmarshalText(text []byte) error {
	v, err := ParseChecksum(string(text))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// PageHash returns h(pgno, page).
func PageHash(pgno uint32, page []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], pgno)
	d.Write(n[:])
	d.Write(page)
	return d.Sum64()
}

// Add returns c with page pgno (content page) included. Use it for a page
// that did not exist before.
func (c Checksum) Add(pgno uint32, page []byte) Checksum {
	return c ^ Checksum(PageHash(pgno, page))
}

// Remove returns c with page pgno (content page) taken out. Use it for a
// page cut off by a truncation. (XOR makes it the same operation as Add; the
// two names say which one the caller means.)
func (c Checksum) Remove(pgno uint32, page []byte) Checksum {
	return c ^ Checksum(PageHash(pgno, page))
}

// Replace returns c after page pgno changed from old to new.
func (c Checksum) Replace(pgno uint32, old, new []byte) Checksum {
	return c ^ Checksum(PageHash(pgno, old)) ^ Checksum(PageHash(pgno, new))
}

// DatabaseChecksum reads a whole database from r, page by page, and returns
// its checksum and page count. A trailing partial page is an error: a
// database file is always a whole number of pages.
func DatabaseChecksum(r io.Reader, pageSize int) (Checksum, uint32, error) {
	if !ValidPageSize(uint32(pageSize)) {
		return 0, 0, &Error{Object: "database", Err: invalid("page size is not a power of two in 512..65536")}
	}
	page := make([]byte, pageSize)
	var c Checksum
	var n uint32
	for {
		_, err := io.ReadFull(r, page)
		if err == io.EOF {
			return c, n, nil
		}
		if err == io.ErrUnexpectedEOF {
			return 0, 0, &Error{Object: "database", Err: corrupt("size is not a whole number of pages")}
		}
		if err != nil {
			return 0, 0, err
		}
		if n == MaxDatabasePages {
			return 0, 0, &Error{Object: "database", Err: tooLarge("more pages than SQLite allows")}
		}
		n++
		c = c.Add(n, page)
	}
}

// ValidPageSize reports whether n is a SQLite page size: a power of two from
// 512 to 65536.
func ValidPageSize(n uint32) bool { return n >= 512 && n <= 65536 && n&(n-1) == 0 }

// MaxDatabasePages is SQLite's largest page count (SQLITE_MAX_PAGE_COUNT).
const MaxDatabasePages = 0xfffffffe
