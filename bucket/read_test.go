package bucket_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
)

// lying is a bucket whose Get reports a size that may not match its body,
// and whose List returns canned pages.
type lying struct {
	bucket.Bucket
	size  int64
	body  string
	pages []bucket.Page
	lists int
}

func (l *lying) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	return io.NopCloser(strings.NewReader(l.body)), bucket.Info{Key: key, Size: l.size, ETag: "e"}, nil
}

func (l *lying) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	if l.lists >= len(l.pages) {
		return bucket.Page{}, errors.New("listed too often")
	}
	l.lists++
	return l.pages[l.lists-1], nil
}

func (l *lying) String() string { return "lying://" }

// TestReadAllChecksSize: ReadAll trusts neither the reported size nor the
// body: a body longer or shorter than its size is an error, and an unknown
// size is read no further than the limit.
func TestReadAllChecksSize(t *testing.T) {
	for _, c := range []struct {
		name  string
		size  int64
		body  string
		limit int64
		want  error // nil: the body comes back
	}{
		{"exact", 5, "hello", 5, nil},
		{"longer than size", 5, "hello world", 100, errors.New("longer")},
		{"longer than size and limit", 5, "hello world", 5, bucket.ErrTooLarge},
		{"shorter than size", 10, "hello", 100, io.ErrUnexpectedEOF},
		{"huge claimed size", 1 << 50, "x", 100, bucket.ErrTooLarge},
		{"unknown size, fits", -1, "hello", 5, nil},
		{"unknown size, too long", -1, strings.Repeat("x", 1000), 999, bucket.ErrTooLarge},
		{"unknown size, empty", -1, "", 0, nil},
	} {
		got, _, err := bucket.ReadAll(t.Context(), &lying{size: c.size, body: c.body}, "k", c.limit)
		switch {
		case c.want == nil:
			assert.NoError(t, err, "%s", c.name)
			assert.Equal(t, c.body, string(got), "%s", c.name)
		case errors.Is(c.want, bucket.ErrTooLarge) || errors.Is(c.want, io.ErrUnexpectedEOF):
			if !errors.Is(err, c.want) || got != nil {
				t.Errorf("%s: %q %v, want %v", c.name, got, err, c.want)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), c.want.Error()) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
			}
		}
		var e *bucket.Error
		if err != nil && (!errors.As(err, &e) || e.Key != "k") {
			t.Errorf("%s: error %v does not name the key", c.name, err)
		}
	}
}

// TestAllChecksListings: All refuses keys out of order or outside the
// prefix, and More with an empty page, instead of looping; it stops paging
// when the caller stops.
func TestAllChecksListings(t *testing.T) {
	page := func(more bool, keys ...string) bucket.Page {
		p := bucket.Page{More: more}
		for _, k := range keys {
			p.Objects = append(p.Objects, bucket.Info{Key: k})
		}
		return p
	}
	collect := func(l *lying, prefix string) ([]string, error) {
		var keys []string
		for o, err := range bucket.All(t.Context(), l, prefix) {
			if err != nil {
				return keys, err
			}
			keys = append(keys, o.Key)
		}
		return keys, nil
	}
	good := &lying{pages: []bucket.Page{page(true, "p/a", "p/b"), page(true, "p/c"), page(false, "p/d")}}
	if keys, err := collect(good, "p/"); err != nil || strings.Join(keys, ",") != "p/a,p/b,p/c,p/d" {
		t.Fatalf("good listing: %q %v", keys, err)
	}
	for name, l := range map[string]*lying{
		"out of order":   {pages: []bucket.Page{page(true, "p/b"), page(false, "p/a")}},
		"repeated key":   {pages: []bucket.Page{page(true, "p/a"), page(false, "p/a")}},
		"outside prefix": {pages: []bucket.Page{page(false, "q/a")}},
		"empty and more": {pages: []bucket.Page{page(true, "p/a"), page(true)}},
	} {
		_, err := collect(l, "p/")
		assert.Error(t, err, "%s", name)
		assert.NotErrorIs(t, err, bucket.ErrNotFound, "%s", name)
	}
	stop := &lying{pages: []bucket.Page{page(true, "p/a", "p/b"), page(false, "p/c")}}
	for range bucket.All(t.Context(), stop, "p/") {
		break
	}
	if stop.lists != 1 {
		t.Fatalf("All listed %d pages after the caller stopped at the first key", stop.lists)
	}
}

// TestAllAfter: AllAfter starts past startAfter, on a real bucket, and
// still refuses a key at or before it.
func TestAllAfter(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			for _, k := range []string{"p/a/1", "p/a/2", "p/b", "p/c", "q"} {
				_, err := b.Put(t.Context(), k, strings.NewReader(k), int64(len(k)), bucket.Condition{})
				require.NoError(t, err)
			}
			var keys []string
			for o, err := range bucket.AllAfter(t.Context(), b, "p/", "p/a/~") {
				require.NoError(t, err)
				keys = append(keys, o.Key)
			}
			require.Equal(t, []string{"p/b", "p/c"}, keys)
		})
	}
	page := bucket.Page{Objects: []bucket.Info{{Key: "p/a"}}}
	var errs []error
	for _, err := range bucket.AllAfter(t.Context(), &lying{pages: []bucket.Page{page}}, "p/", "p/b") {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.Error(t, errs[0], "a key before startAfter")
}
