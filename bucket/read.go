package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
)

// ReadAll reads a whole object of at most maxSize bytes. It allocates no more
// than the object's size (at most maxSize) plus a few bytes, whatever the
// object or the server claims: an object larger than maxSize is ErrTooLarge
// (wrapped in *Error with the key), read no further than maxSize+1 bytes. A
// body shorter or longer than the size the backend reported is an error
// too, so a truncated transfer is never taken for a whole object.
func ReadAll(ctx context.Context, b Bucket, key string, maxSize int64) ([]byte, Info, error) {
	if maxSize < 0 {
		return nil, Info{}, &Error{Op: "get", Key: key, Err: fmt.Errorf("invalid limit %d", maxSize)}
	}
	rc, info, err := b.Get(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	defer rc.Close()
	tooLarge := func(n string) error {
		return &Error{Op: "get", Key: key, Err: fmt.Errorf("%w: %s bytes, the limit is %d", ErrTooLarge, n, maxSize)}
	}
	if info.Size > maxSize {
		return nil, info, tooLarge(fmt.Sprint(info.Size))
	}
	if info.Size < 0 {
		// Size unknown: grow as bytes arrive, never past max+1.
		data, err := readCapped(rc, maxSize)
		if err != nil {
			return nil, info, &Error{Op: "get", Key: key, Err: err}
		}
		if int64(len(data)) > maxSize {
			return nil, info, tooLarge("more than " + fmt.Sprint(maxSize))
		}
		return data, info, nil
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(rc, data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, info, &Error{Op: "get", Key: key, Err: fmt.Errorf("reading %d bytes: %w", info.Size, err)}
	}
	var extra [1]byte
	n, err := io.ReadFull(rc, extra[:])
	if n > 0 {
		if info.Size == maxSize {
			return nil, info, tooLarge("more than " + fmt.Sprint(maxSize))
		}
		return nil, info, &Error{Op: "get", Key: key, Err: fmt.Errorf("body longer than its size %d", info.Size)}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, info, &Error{Op: "get", Key: key, Err: err}
	}
	return data, info, nil
}

// readCapped reads r to its end or to maxSize+1 bytes, whichever comes first.
func readCapped(r io.Reader, maxSize int64) ([]byte, error) {
	limit := maxSize + 1
	buf := make([]byte, 0, min(limit, 512))
	for {
		if int64(len(buf)) == limit {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(limit, int64(cap(buf))*2))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// All iterates over every object whose key starts with prefix, in byte
// order, one page at a time. It stops at the first error, which it yields
// with a zero Info. A backend that answers out of order, or More without
// keys, is reported rather than followed round in circles.
func All(ctx context.Context, b Bucket, prefix string) iter.Seq2[Info, error] {
	return AllAfter(ctx, b, prefix, "")
}

// AllAfter is All from the first key after startAfter: a reader that wants
// only some of a prefix's keys skips those before them unlisted.
func AllAfter(ctx context.Context, b Bucket, prefix, startAfter string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		after := startAfter
		for {
			page, err := b.List(ctx, prefix, after, 0)
			if err != nil {
				yield(Info{}, err)
				return
			}
			for _, o := range page.Objects {
				if (after != "" && o.Key <= after) || !strings.HasPrefix(o.Key, prefix) {
					yield(Info{}, &Error{Op: "list", Key: prefix, Err: fmt.Errorf("%s listed %q after %q: not in byte order under the prefix", b, o.Key, after)})
					return
				}
				if !yield(o, nil) {
					return
				}
				after = o.Key
			}
			if !page.More {
				return
			}
			if len(page.Objects) == 0 {
				yield(Info{}, &Error{Op: "list", Key: prefix, Err: fmt.Errorf("%s reported more keys after %q but listed none", b, after)})
				return
			}
		}
	}
}
