package buckettest

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/framectl/framectl/bucket"
)

// ErrOutage is what every call to an Outage that is down fails with.
var ErrOutage = errors.New("buckettest: bucket unreachable")

// Outage wraps a bucket and, while it is down, fails every call before it
// reaches the bucket, as a bucket that does not answer at all (a network
// partition, a region down): unlike Faulty's rates, nothing gets through
// until the test brings it back up. It starts up; it is safe for
// concurrent use.
type Outage struct {
	bucket.Bucket
	down atomic.Bool
}

// NewOutage wraps inner.
func NewOutage(inner bucket.Bucket) *Outage { return &Outage{Bucket: inner} }

// SetDown takes the bucket down (true) or brings it back up (false).
func (o *Outage) SetDown(down bool) { o.down.Store(down) }

func (o *Outage) check() error {
	if o.down.Load() {
		return ErrOutage
	}
	return nil
}

// Get fails while down, or reads the inner bucket.
func (o *Outage) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if err := o.check(); err != nil {
		return nil, bucket.Info{}, err
	}
	return o.Bucket.Get(ctx, key)
}

// Put fails while down, or writes the inner bucket.
func (o *Outage) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if err := o.check(); err != nil {
		return bucket.Info{}, err
	}
	return o.Bucket.Put(ctx, key, body, size, cond)
}

// Stat fails while down, or stats the inner bucket.
func (o *Outage) Stat(ctx context.Context, key string) (bucket.Info, error) {
	if err := o.check(); err != nil {
		return bucket.Info{}, err
	}
	return o.Bucket.Stat(ctx, key)
}

// List fails while down, or lists the inner bucket.
func (o *Outage) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	if err := o.check(); err != nil {
		return bucket.Page{}, err
	}
	return o.Bucket.List(ctx, prefix, startAfter, limit)
}

// Delete fails while down, or deletes from the inner bucket.
func (o *Outage) Delete(ctx context.Context, key string) error {
	if err := o.check(); err != nil {
		return err
	}
	return o.Bucket.Delete(ctx, key)
}

// DeleteMany fails while down, or deletes from the inner bucket.
func (o *Outage) DeleteMany(ctx context.Context, keys []string) error {
	if err := o.check(); err != nil {
		return err
	}
	return o.Bucket.DeleteMany(ctx, keys)
}
