package metrics

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/framectl/framectl/bucket"
)

// The operations and results of bucket requests, as labelled.
const (
	opGet = iota
	opPut
	opStat
	opList
	opDelete
	opDeleteMany
	numOps
)

var opNames = [numOps]string{"get", "put", "stat", "list", "delete", "delete_many"}

const (
	resultOK = iota
	resultNotFound
	resultPrecondition
	resultCanceled
	resultError
	numResults
)

var resultNames = [numResults]string{"ok", "not_found", "precondition", "canceled", "error"}

// resultOf names what a request came to. A missing object and a lost
// conditional write are answers the engine asks for (a Stat to see whether
// a key exists, a create-only put racing a peer), not failures.
func resultOf(err error) int {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, bucket.ErrNotFound):
		return resultNotFound
	case errors.Is(err, bucket.ErrPrecondition):
		return resultPrecondition
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return resultCanceled
	}
	return resultError
}

// bucketMetrics count and time requests. The series are resolved once, at
// New, so a request costs an atomic add and a histogram observation.
type bucketMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	counts   [numOps][numResults]prometheus.Counter
	times    [numOps]prometheus.Observer
}

// bucketSeconds are the buckets of request latency: a directory bucket
// answers in tens of microseconds to milliseconds (a put fsyncs), an S3
// server in milliseconds to seconds.
var bucketSeconds = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newBucketMetrics() *bucketMetrics {
	m := &bucketMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framectl_bucket_requests_total",
			Help: "Bucket requests by operation and result (ok, not_found, precondition, canceled, error).",
		}, []string{"op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "framectl_bucket_request_duration_seconds",
			Help:    "Latency of bucket requests by operation, whatever their result (a get: until its body is open).",
			Buckets: bucketSeconds,
		}, []string{"op"}),
	}
	for op := range numOps {
		for res := range numResults {
			m.counts[op][res] = m.requests.WithLabelValues(opNames[op], resultNames[res])
		}
		m.times[op] = m.duration.WithLabelValues(opNames[op])
	}
	return m
}

func (m *bucketMetrics) done(op int, began time.Time, err error) {
	m.times[op].Observe(time.Since(began).Seconds())
	m.counts[op][resultOf(err)].Inc()
}

// observedBucket is a bucket whose requests are counted and timed. It
// answers exactly what the bucket it wraps answers.
type observedBucket struct {
	b bucket.Bucket
	m *bucketMetrics
}

var _ bucket.Bucket = (*observedBucket)(nil)

// Unwrap returns the bucket observed: a session paces uploads by the kind of
// bucket beneath (session.Config.UploadInterval), and observing it must not
// change that.
func (o *observedBucket) Unwrap() bucket.Bucket { return o.b }

func (o *observedBucket) String() string { return o.b.String() }

func (o *observedBucket) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	began := time.Now()
	rc, info, err := o.b.Get(ctx, key)
	o.m.done(opGet, began, err)
	return rc, info, err
}

func (o *observedBucket) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	began := time.Now()
	info, err := o.b.Put(ctx, key, body, size, cond)
	o.m.done(opPut, began, err)
	return info, err
}

func (o *observedBucket) Stat(ctx context.Context, key string) (bucket.Info, error) {
	began := time.Now()
	info, err := o.b.Stat(ctx, key)
	o.m.done(opStat, began, err)
	return info, err
}

func (o *observedBucket) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	began := time.Now()
	page, err := o.b.List(ctx, prefix, startAfter, limit)
	o.m.done(opList, began, err)
	return page, err
}

func (o *observedBucket) Delete(ctx context.Context, key string) error {
	began := time.Now()
	err := o.b.Delete(ctx, key)
	o.m.done(opDelete, began, err)
	return err
}

func (o *observedBucket) DeleteMany(ctx context.Context, keys []string) error {
	began := time.Now()
	err := o.b.DeleteMany(ctx, keys)
	o.m.done(opDeleteMany, began, err)
	return err
}
