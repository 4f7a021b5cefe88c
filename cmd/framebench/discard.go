package main

import (
	"context"
	"io"

	"github.com/framectl/framectl/bucket"
)

// discard is a bucket that accepts every object and keeps none. It is not
// a test double: the overhead benchmark runs it beside the directory bucket
// to split the cost of replication into what the process spends (capture,
// batching, compression) and what the bucket's own I/O costs (the directory
// bucket fsyncs every object on the same disk as the database).
type discard struct{}

var _ bucket.Bucket = discard{}

func (discard) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	return nil, bucket.Info{}, &bucket.Error{Op: "get", Key: key, Err: bucket.ErrNotFound}
}

func (discard) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	n, err := io.Copy(io.Discard, body)
	return bucket.Info{Key: key, Size: n}, err
}

func (discard) Stat(ctx context.Context, key string) (bucket.Info, error) {
	return bucket.Info{}, &bucket.Error{Op: "stat", Key: key, Err: bucket.ErrNotFound}
}

func (discard) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	return bucket.Page{}, nil
}

func (discard) Delete(ctx context.Context, key string) error        { return nil }
func (discard) DeleteMany(ctx context.Context, keys []string) error { return nil }
func (discard) String() string                                      { return "discard:" }
