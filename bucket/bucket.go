// Package bucket owns the object-store contract framectl needs and its
// implementations: S3 (minio-go) and a local directory (the embedded
// default). What tests wrap around them, a fault-injecting bucket among it,
// is package buckettest's.
//
// The contract is deliberately narrow: whole and streamed reads, three kinds of
// write (unconditional, create-only, compare-and-swap on an ETag), stat,
// listing in byte order with start-after paging, and deletes. Everything the
// engine knows about consistency it learns through this interface, so every
// implementation must give the same answers; one contract suite
// (contract_test.go) runs against all of them.
//
// This package must never interpret object contents or key layout: keys are
// opaque byte strings here (the layout belongs to package frames), and bodies
// are bytes.
package bucket

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors. Implementations wrap them with the key they concern
// (*Error), so callers test with errors.Is and print the key for free.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPrecondition: a conditional write lost. The object exists for a
	// create-only put, or its ETag differs (or it is absent) for a
	// compare-and-swap. S3 answers 412 PreconditionFailed or, for racing
	// conditional writes, 409 ConditionalRequestConflict: both map here.
	ErrPrecondition = errors.New("precondition failed")
	// ErrKeyConflict: the key is also a "directory" of another key (or the
	// other way round). versitygw and the directory bucket store keys as
	// files, so "p" and "p/q" cannot both exist.
	ErrKeyConflict = errors.New("key conflicts with an existing key prefix")
	// ErrInvalidKey: the key cannot be stored (empty, empty path component,
	// "." or "..", NUL byte, backslash, too long, reserved name).
	ErrInvalidKey = errors.New("invalid object key")
	// ErrNoBucket: the bucket (or directory) does not exist.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrTooLarge: an object is larger than the caller allowed, or a
	// conditional write is larger than the backend can make conditional.
	// It is not damage by itself (frames.ErrDamage): a caller whose limit
	// no sound object exceeds marks it so (frames.Damaged).
	ErrTooLarge = errors.New("object too large")
)

// Error is an operation on one object that failed.
type Error struct {
	Op  string // "get", "put", "stat", "list", "delete" ("open" from NewDir and Open)
	Key string // object key (for list: the prefix)
	Err error
}

func (e *Error) Error() string { return "bucket: " + e.Op + " " + e.Key + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// PrintsKey reports whether key is the one the error names
// (frames.KeyPrinter).
func (e *Error) PrintsKey(key string) bool { return e.Key == key }

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ETag    string // opaque; changes whenever the content is replaced
	ModTime time.Time
}

// Condition restricts a Put. The zero value is an unconditional put.
type Condition struct {
	// IfAbsent makes the put create-only (S3: If-None-Match: *).
	IfAbsent bool
	// IfMatch makes the put a compare-and-swap: it succeeds only if the
	// object exists with exactly this ETag (S3: If-Match).
	IfMatch string
}

// Page is one page of a listing.
type Page struct {
	Objects []Info
	// More reports that keys past the last one returned may match; ask again
	// with StartAfter set to the last key.
	More bool
}

// DefaultPageSize is the listing page size when the caller asks for 0: the
// S3 maximum, so the directory bucket pages exactly like S3 does.
const DefaultPageSize = 1000

// Bucket is the object-store contract.
//
// Keys are compared as byte strings. Implementations are safe for concurrent
// use by many goroutines; the directory bucket is also safe across processes.
type Bucket interface {
	// Get opens an object for streaming. The caller must Close the reader.
	// A missing object is ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Put stores size bytes read from body under key, subject to cond.
	// size must be exact (-1 is allowed only for unconditional puts and
	// means "unknown, stream it"). The content is never torn: a reader sees
	// the old object or the new one, whole.
	Put(ctx context.Context, key string, body io.Reader, size int64, cond Condition) (Info, error)
	// Stat describes an object without reading it.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns up to limit keys (0 = DefaultPageSize) that start with
	// prefix and sort strictly after startAfter, in byte order.
	List(ctx context.Context, prefix, startAfter string, limit int) (Page, error)
	// Delete removes one object. Deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteMany removes objects; missing ones are not an error. It returns
	// the first failure, wrapped with its key, after trying every key.
	DeleteMany(ctx context.Context, keys []string) error
	// String names the bucket as a URL (credentials never included).
	String() string
}
