package buckettest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// Counting passes every call to a real bucket and counts the calls by
// operation and by the kind of key they concern (frames.ParseKey; a
// listing by the kind of its prefix), so that a test or a benchmark can
// say which requests the code under test made. A DeleteMany counts once, as S3's
// DeleteObjects is one request, under the kind of its first key.
type Counting struct {
	bucket.Bucket
	mu sync.Mutex
	n  map[Req]int64
}

// Req is one counter: an operation ("get", "put", "stat", "list",
// "delete", "deletemany") on a kind of key ("own", "log", "snapshot",
// "chunk", "node", "alarm", ...).
type Req struct{ Op, Kind string }

func (k Req) String() string { return k.Op + "-" + k.Kind }

// NewCounting counts the calls to b.
func NewCounting(b bucket.Bucket) *Counting {
	return &Counting{Bucket: b, n: map[Req]int64{}}
}

func (c *Counting) count(op, key string) {
	k := Req{op, keyKind(key)}
	c.mu.Lock()
	c.n[k]++
	c.mu.Unlock()
}

// Counts returns a copy of the counters.
func (c *Counting) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// Counts are counters at one moment, or the difference of two.
type Counts map[Req]int64

// Since returns what was counted after earlier.
func (r Counts) Since(earlier Counts) Counts {
	out := Counts{}
	for k, v := range r {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Get returns the count of op on kind.
func (r Counts) Get(op, kind string) int64 { return r[Req{op, kind}] }

// Total sums the counters.
func (r Counts) Total() int64 {
	var t int64
	for _, v := range r {
		t += v
	}
	return t
}

// String lists the counters in order, "get-own=3 put-node=2".
func (r Counts) String() string {
	keys := slices.SortedFunc(maps.Keys(r), func(a, b Req) int { return strings.Compare(a.String(), b.String()) })
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s=%d", k, r[k])
	}
	return sb.String()
}

// keyKind names the kind of a key or of a listing's prefix.
func keyKind(key string) string {
	if k, err := frames.ParseKey(key); err == nil {
		return k.Kind.String()
	}
	switch {
	case strings.HasPrefix(key, frames.AlarmsPrefix):
		return "alarm"
	case strings.HasPrefix(key, frames.NodesPrefix):
		return "node"
	case key == "do/":
		return "do"
	}
	// do/<ns>/<actor>/<kind>/...: a prefix within one actor's objects.
	parts := strings.Split(key, "/")
	if len(parts) >= 4 && parts[0] == "do" {
		if parts[3] == "" {
			return "actor"
		}
		return parts[3]
	}
	return "other"
}

func (c *Counting) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	c.count("get", key)
	return c.Bucket.Get(ctx, key)
}

func (c *Counting) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	c.count("put", key)
	return c.Bucket.Put(ctx, key, body, size, cond)
}

func (c *Counting) Stat(ctx context.Context, key string) (bucket.Info, error) {
	c.count("stat", key)
	return c.Bucket.Stat(ctx, key)
}

func (c *Counting) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	c.count("list", prefix)
	return c.Bucket.List(ctx, prefix, startAfter, limit)
}

func (c *Counting) Delete(ctx context.Context, key string) error {
	c.count("delete", key)
	return c.Bucket.Delete(ctx, key)
}

func (c *Counting) DeleteMany(ctx context.Context, keys []string) error {
	if len(keys) > 0 {
		c.count("deletemany", keys[0])
	}
	return c.Bucket.DeleteMany(ctx, keys)
}
