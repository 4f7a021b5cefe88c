package bucket

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on keys. Every backend enforces the same rules, so a key that can be
// stored in one bucket can be stored in any other (a directory bucket copied
// to S3, a test written against one backend and run against another).
const (
	// MaxKeyLen is S3's limit on a key, in bytes. For an S3 bucket with a
	// prefix the limit applies to the key with its prefix.
	MaxKeyLen = 1024
	// MaxKeyComponentLen is the longest part of a key between slashes, in
	// bytes. The directory bucket and versitygw store components as file
	// names, limited to 255 bytes, but versitygw v1.8.0 replaces an object
	// through a temporary link named ".<name>.sgwtmp.<nanoseconds>", 28
	// bytes longer: it fails to overwrite (409 ExistingObjectIsDirectory)
	// objects whose last component is over 227 bytes. 200 leaves a margin.
	MaxKeyComponentLen = 200
	// ReservedName may not be the first component of a key: the directory
	// bucket keeps its temporary files and its lock under it.
	ReservedName = ".framectl"
)

// CheckKey reports whether key can be stored: it returns nil or an error
// wrapping ErrInvalidKey that says what is wrong (without repeating the key).
//
// A key is 1 to MaxKeyLen bytes of valid UTF-8 without NUL or backslash,
// made of components separated by single slashes (none leading or
// trailing), each component 1 to MaxKeyComponentLen bytes and neither "."
// nor "..", the first one not ReservedName. Backslash is out because Windows
// reads it as a path separator: the directory bucket there would take
// `..\..\x` for a path out of its root.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidKey)
	case strings.IndexByte(key, '\\') >= 0:
		return fmt.Errorf("%w: contains a backslash", ErrInvalidKey)
	}
	first := true
	for rest := key; ; first = false {
		comp, tail, more := strings.Cut(rest, "/")
		switch {
		case comp == "":
			return fmt.Errorf("%w: empty path component (leading, trailing or double slash)", ErrInvalidKey)
		case comp == "." || comp == "..":
			return fmt.Errorf("%w: path component %q", ErrInvalidKey, comp)
		case len(comp) > MaxKeyComponentLen:
			return fmt.Errorf("%w: path component of %d bytes, longer than %d", ErrInvalidKey, len(comp), MaxKeyComponentLen)
		case first && comp == ReservedName:
			return fmt.Errorf("%w: %q is reserved", ErrInvalidKey, ReservedName)
		}
		if !more {
			return nil
		}
		rest = tail
	}
}

// errSizeRequired: a conditional put must say how long its body is. S3 can
// only make a single-part PUT conditional, and a single PUT needs a length.
var errSizeRequired = errors.New("conditional put needs the exact body size, not -1")

// checkPut validates the arguments every Put shares.
func checkPut(key string, size int64, cond Condition) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if size < -1 {
		return fmt.Errorf("invalid size %d (want a byte count, or -1 for unknown)", size)
	}
	if cond.IfAbsent && cond.IfMatch != "" {
		return errors.New("invalid condition: IfAbsent and IfMatch exclude each other")
	}
	if cond.IfMatch == "*" {
		// S3 reads If-Match: * as "exists with any ETag"; the contract is an
		// exact ETag, and no backend ever issues "*".
		return errors.New(`invalid condition: IfMatch "*" is not an ETag`)
	}
	if size < 0 && (cond.IfAbsent || cond.IfMatch != "") {
		return errSizeRequired
	}
	return nil
}
