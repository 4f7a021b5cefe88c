package fence

import (
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// ReadRecord reads and parses actor a's own.json: the one reader of the
// record, for claims and for everyone who inspects it (restore, verify,
// compact, the CLI). A missing record is an error matching
// bucket.ErrNotFound; a record that does not parse, or is larger than
// MaxRecordBytes, matches ErrBadRecord and names the key. info describes
// the version read (its ETag, for a compare-and-swap).
func ReadRecord(ctx context.Context, b bucket.Bucket, a frames.Actor) (Record, bucket.Info, error) {
	key := a.OwnKey()
	data, info, err := readSmall(ctx, b, key, ErrBadRecord)
	if err != nil {
		return Record{}, info, err
	}
	r, err := ParseRecord(key, data)
	return r, info, err
}

// ReadLease reads and parses node id's lease; errors as for ReadRecord,
// matching ErrBadLease for a lease that does not parse.
func ReadLease(ctx context.Context, b bucket.Bucket, id string) (Lease, bucket.Info, error) {
	key := frames.NodeKey(id)
	data, info, err := readSmall(ctx, b, key, ErrBadLease)
	if err != nil {
		return Lease{}, info, err
	}
	l, err := ParseLease(key, data)
	return l, info, err
}

// readSmall reads a record of at most MaxRecordBytes; a larger object is
// bad (an error matching bad and bucket.ErrTooLarge), not a read failure.
func readSmall(ctx context.Context, b bucket.Bucket, key string, bad error) ([]byte, bucket.Info, error) {
	data, info, err := bucket.ReadAll(ctx, b, key, MaxRecordBytes)
	if errors.Is(err, bucket.ErrTooLarge) {
		return nil, info, &badObject{bad: bad, key: key, msg: fmt.Sprintf("larger than %d bytes", MaxRecordBytes), cause: err}
	}
	return data, info, err
}
