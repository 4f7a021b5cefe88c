package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
)

// S3 is a bucket on an S3-compatible server (AWS S3, R2, MinIO, versitygw)
// through minio-go, optionally confined to a key prefix.
//
// Conditional writes are S3's conditional PUT: If-None-Match: * for
// IfAbsent, If-Match: "<etag>" for IfMatch. Servers honour those headers on
// a single-part PUT only (a multipart upload drops them), so a conditional
// put is always one PUT request, which needs its exact size and is limited
// to MaxConditionalPutSize.
//
// A conditional PUT retried after a lost response (minio-go retries
// seekable bodies on network errors) answers 412 even though the first
// attempt landed: ErrPrecondition means "not written by this call, or
// written by an earlier attempt of it". Callers that must know read the key
// back (the fencing protocol does).
//
// Errors name keys as the caller does, without the bucket's prefix; String
// shows the prefix.
type S3 struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string // "" or ending in "/"
	url    string // for String

	// bucketSeen: the bucket has answered as existing, so a HEAD's bodiless
	// 404 means the key is missing (see Stat).
	bucketSeen atomic.Bool
}

var _ Bucket = (*S3)(nil)

const (
	// MaxConditionalPutSize is the largest body a conditional put accepts:
	// AWS's limit on a single PUT. Larger ones fail with ErrTooLarge.
	MaxConditionalPutSize = 5 << 30
	// streamPartSize is the part size for puts of unknown size, which are
	// multipart uploads: memory held per such put, and a cap of 10,000
	// parts × 16 MiB = 160 GiB on the object. (minio-go's default for an
	// unknown size is a 537 MiB part buffer.)
	streamPartSize = 16 << 20
	// s3MaxKeys is the most keys an S3 listing request returns.
	s3MaxKeys = 1000
)

// NewS3 returns a bucket on client's bucketName. prefix, if not empty, is
// prepended to every key with a "/" between (slashes around it are
// trimmed). No request is made: a missing bucket shows as ErrNoBucket (or,
// for Stat, ErrNotFound: a HEAD response has no body to tell them apart) on
// the first operation.
func NewS3(client *minio.Client, bucketName, prefix string) (*S3, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("bucket: s3 prefix %q: %w", prefix, err)
		}
		prefix += "/"
	}
	s := &S3{client: client, core: minio.Core{Client: client}, bucket: bucketName, prefix: prefix}
	s.url = "s3://" + bucketName + "/" + strings.TrimSuffix(prefix, "/")
	return s, nil
}

// String returns the bucket's URL as given to NewS3 (Open sets the full
// URL, query included). Credentials are never part of it.
func (s *S3) String() string { return s.url }

func (s *S3) full(key string) string { return s.prefix + key }

// checkFull validates key and the length it has with the prefix.
func (s *S3) checkFull(key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if n := len(s.prefix) + len(key); n > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes with the bucket prefix, longer than %d", ErrInvalidKey, n, MaxKeyLen)
	}
	return nil
}

// Get opens the object with one GET request, so the body is one version
// of the object, never parts of two.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := s.checkFull(key); err != nil {
		return nil, Info{}, &Error{Op: "get", Key: key, Err: err}
	}
	rc, oi, _, err := s.core.GetObject(ctx, s.bucket, s.full(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s.fail("get", key, err, false)
	}
	s.bucketSeen.Store(true)
	return rc, s.info(key, oi), nil
}

// Stat is a HEAD request. A 404 answer to HEAD has no body, so it cannot
// say whether the key or the whole bucket is missing: the first time, the
// bucket is checked, so that a missing bucket is ErrNoBucket here as
// everywhere else.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := s.checkFull(key); err != nil {
		return Info{}, &Error{Op: "stat", Key: key, Err: err}
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.full(key), minio.StatObjectOptions{})
	if err != nil {
		err = s.fail("stat", key, err, false)
		if errors.Is(err, ErrNotFound) && !s.bucketSeen.Load() {
			switch ok, berr := s.client.BucketExists(ctx, s.bucket); {
			case berr != nil:
				return Info{}, s.fail("stat", key, berr, false)
			case !ok:
				return Info{}, &Error{Op: "stat", Key: key, Err: ErrNoBucket}
			}
			s.bucketSeen.Store(true)
		}
		return Info{}, err
	}
	s.bucketSeen.Store(true)
	return s.info(key, oi), nil
}

// Put uploads the body: one PUT when the size is known and small enough
// (always, for a conditional put), a multipart upload with bounded memory
// otherwise. The ModTime of the Info returned is zero: a PUT response does
// not carry it (Stat does).
func (s *S3) Put(ctx context.Context, key string, body io.Reader, size int64, cond Condition) (Info, error) {
	if err := checkPut(key, size, cond); err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	if err := s.checkFull(key); err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	switch {
	case cond.IfAbsent:
		opts.SetMatchETagExcept("*")
		opts.DisableMultipart = true
	case cond.IfMatch != "":
		opts.SetMatchETag(cond.IfMatch)
		opts.DisableMultipart = true
	case size < 0:
		opts.PartSize = streamPartSize
	}
	if err := checkRemaining(body, size); err != nil {
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	if opts.DisableMultipart && size > MaxConditionalPutSize {
		err := fmt.Errorf("%w: a conditional put of %d bytes exceeds the single-PUT limit of %d", ErrTooLarge, size, int64(MaxConditionalPutSize))
		return Info{}, &Error{Op: "put", Key: key, Err: err}
	}
	ui, err := s.client.PutObject(ctx, s.bucket, s.full(key), body, size, opts)
	if err != nil {
		return Info{}, s.fail("put", key, err, cond.IfMatch != "")
	}
	s.bucketSeen.Store(true)
	return Info{Key: key, Size: ui.Size, ETag: ui.ETag, ModTime: ui.LastModified}, nil
}

// List asks for one more key than the page holds, to report More exactly.
// When that key would cost a request of its own (limit of 1,000 or more),
// it is looked up with a one-key request instead of a full page.
func (s *S3) List(ctx context.Context, prefix, startAfter string, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	perRequest := min(limit+1, s3MaxKeys)
	objs, more, err := s.list(ctx, prefix, startAfter, limit, perRequest)
	if err != nil {
		return Page{}, err
	}
	if len(objs) == limit && !more && perRequest <= limit {
		next, _, err := s.list(ctx, prefix, objs[len(objs)-1].Key, 1, 1)
		if err != nil {
			return Page{}, err
		}
		more = len(next) > 0
	}
	return Page{Objects: objs, More: more}, nil
}

// list returns up to limit keys, and whether it saw another one, fetching
// perRequest keys per request. The iterator is synchronous: leaving the loop
// stops it, no goroutine is left behind.
func (s *S3) list(ctx context.Context, prefix, startAfter string, limit, perRequest int) ([]Info, bool, error) {
	fetchOwner := false // minio-go asks for owners by default; nothing here needs them
	opts := minio.ListObjectsOptions{
		Prefix:     s.prefix + prefix,
		Recursive:  true,
		MaxKeys:    perRequest,
		FetchOwner: &fetchOwner,
	}
	if startAfter != "" {
		opts.StartAfter = s.prefix + startAfter
	}
	objs := make([]Info, 0, min(limit, s3MaxKeys))
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		if oi.Err != nil {
			return nil, false, s.fail("list", prefix, oi.Err, false)
		}
		key, ok := strings.CutPrefix(oi.Key, s.prefix)
		if !ok {
			continue
		}
		if len(objs) == limit {
			return objs, true, nil
		}
		objs = append(objs, s.info(key, oi))
		if len(objs) == limit && perRequest <= limit {
			break // the next key would cost a full request: List probes for it
		}
	}
	if err := ctx.Err(); err != nil {
		// the iterator ends silently on a cancelled context
		return nil, false, &Error{Op: "list", Key: prefix, Err: err}
	}
	return objs, false, nil
}

// Delete removes one object; S3 answers success for a missing one.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := s.checkFull(key); err != nil {
		return &Error{Op: "delete", Key: key, Err: err}
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.full(key), minio.RemoveObjectOptions{})
	if err != nil {
		if err := s.fail("delete", key, err, false); !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// DeleteMany sends multi-object deletes of up to 1,000 keys each. Each
// batch's channel is filled and closed before minio-go reads it, and its
// results are drained to the end, so no goroutine outlives the call.
func (s *S3) DeleteMany(ctx context.Context, keys []string) error {
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	valid := make([]string, 0, len(keys))
	for _, key := range keys {
		if err := s.checkFull(key); err != nil {
			fail(&Error{Op: "delete", Key: key, Err: err})
			continue
		}
		valid = append(valid, key)
	}
	for batch := range slices.Chunk(valid, s3MaxKeys) {
		objs := make(chan minio.ObjectInfo, len(batch))
		for _, key := range batch {
			objs <- minio.ObjectInfo{Key: s.full(key)}
		}
		close(objs)
		for res := range s.client.RemoveObjects(ctx, s.bucket, objs, minio.RemoveObjectsOptions{}) {
			if res.Err == nil {
				continue
			}
			key, ok := strings.CutPrefix(res.ObjectName, s.prefix)
			if !ok || key == "" {
				key = batch[0] // a failure of the whole request
			}
			if err := s.fail("delete", key, res.Err, false); !errors.Is(err, ErrNotFound) {
				fail(err)
			}
		}
	}
	return first
}

// info converts minio's description of an object.
func (s *S3) info(key string, oi minio.ObjectInfo) Info {
	return Info{Key: key, Size: oi.Size, ETag: strings.Trim(oi.ETag, `"`), ModTime: oi.LastModified}
}

// fail wraps a minio-go error in *Error, mapping the answers the contract
// names to its sentinels. The server's error stays in the chain, so its code
// and message are printed and errors.As still finds minio.ErrorResponse.
//
//	404 NoSuchBucket                     ErrNoBucket
//	404 NoSuchKey                        ErrNotFound; ErrPrecondition for If-Match
//	                                     (AWS answers If-Match on an absent key so)
//	412 PreconditionFailed               ErrPrecondition
//	409 ConditionalRequestConflict       ErrPrecondition (AWS, racing conditional writes)
//	409 ObjectParentIsFile               ErrKeyConflict (versitygw: "p" exists, put "p/q")
//	409 ExistingObjectIsDirectory        ErrKeyConflict (versitygw: "p/q" exists, put "p")
func (s *S3) fail(op, key string, err error, ifMatch bool) error {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return &Error{Op: op, Key: key, Err: err}
	}
	var sentinel error
	switch {
	case resp.Code == "NoSuchBucket":
		sentinel = ErrNoBucket
	case resp.StatusCode == http.StatusNotFound && ifMatch:
		sentinel = ErrPrecondition
	case resp.Code == "NoSuchKey", resp.StatusCode == http.StatusNotFound && op != "list":
		sentinel = ErrNotFound
	case resp.StatusCode == http.StatusPreconditionFailed, resp.Code == "PreconditionFailed",
		resp.Code == "ConditionalRequestConflict":
		sentinel = ErrPrecondition
	case resp.Code == "ObjectParentIsFile", resp.Code == "ExistingObjectIsDirectory":
		sentinel = ErrKeyConflict
	}
	if sentinel == nil {
		return &Error{Op: op, Key: key, Err: err}
	}
	return &Error{Op: op, Key: key, Err: fmt.Errorf("%w: %w", sentinel, err)}
}

// checkRemaining refuses a seekable body shorter than size. minio-go
// retries a failed PUT of a seekable body ten times with backoff (seconds),
// and a short body fails every time; a body that cannot seek is not retried
// and fails at once anyway.
func checkRemaining(body io.Reader, size int64) error {
	sk, ok := body.(io.Seeker)
	if !ok || size <= 0 {
		return nil
	}
	cur, err := sk.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil // not really seekable (a pipe): let the upload find out
	}
	end, err := sk.Seek(0, io.SeekEnd)
	if _, serr := sk.Seek(cur, io.SeekStart); err != nil || serr != nil {
		return errors.Join(err, serr)
	}
	if end-cur < size {
		return fmt.Errorf("body has %d of %d bytes: %w", end-cur, size, io.ErrUnexpectedEOF)
	}
	return nil
}
