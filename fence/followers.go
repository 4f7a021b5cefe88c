package fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/internal/logattr"
)

// RecordFollowers records a new follower set for the claim o in own.json:
// the same epoch, node, address and retention, with followers and quorum
// (none and 0: back to bucket-only). It is the write package follow's
// Owner.Pending waits for ("Replacing a follower"): conditional on the
// version o holds (If-Match), so it fails once a newer owner claimed the
// actor, and it returns o with the new version, for Release and the next
// RecordFollowers. A set that breaks the rules of the format ("Ownership
// record" in the package documentation) is refused before anything is
// written.
//
// A 412 or an unknown answer (a lost response, a timeout) is read back: if
// own.json holds what this call wrote, it landed. If it holds a newer
// epoch or another node, the error matches ErrFenced, as Release's does:
// someone else owns the actor. Otherwise (own.json changed at this claim's
// epoch by another writer, or the read back failed) it is an error that
// says what own.json holds; o is left as it was, and may still be released
// if own.json holds what o does.
func (n *Node) RecordFollowers(ctx context.Context, o Ownership, followers []string, quorum int) (Ownership, error) {
	key := o.Actor.OwnKey()
	if err := n.Valid(); err != nil {
		return o, err
	}
	if msg := checkFollowers(n.id, followers, quorum); msg != "" {
		return o, fmt.Errorf("fence: recording followers in %s: %s", key, msg)
	}
	next := Record{Epoch: o.Epoch, Node: n.id, Address: n.address, Retention: o.retention, Followers: slices.Clone(followers), Quorum: quorum}
	if len(next.Followers) == 0 {
		next.Followers = nil
	}
	body := next.Marshal()
	done := func(etag string) Ownership {
		o.Followers, o.Quorum, o.etag = next.Followers, next.Quorum, etag
		return o
	}
	put, err := n.b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: o.etag})
	if err == nil {
		n.log.Info("recorded followers", logattr.Key, key, logattr.Epoch, o.Epoch, logattr.Followers, next.Followers, logattr.Quorum, quorum)
		return done(put.ETag), nil
	}
	// A 412, or no answer at all: our PUT may have landed (a retry, a
	// lost response). Read it back.
	cur, info, rerr := ReadRecord(ctx, n.b, o.Actor)
	switch {
	case rerr == nil && cur.Equal(next):
		n.log.Info("recorded followers", logattr.Key, key, logattr.Epoch, o.Epoch, logattr.Followers, next.Followers, logattr.Quorum, quorum)
		return done(info.ETag), nil
	case rerr == nil && (cur.Epoch > o.Epoch || cur.Node != n.id):
		return o, fmt.Errorf("%w: recording followers in %s: it names epoch %d (node %q) while this node held epoch %d",
			ErrFenced, key, cur.Epoch, cur.Node, o.Epoch)
	case rerr == nil && errors.Is(err, bucket.ErrPrecondition):
		return o, fmt.Errorf("fence: recording followers in %s: it changed at epoch %d (followers %v, quorum %d), not by this write",
			key, cur.Epoch, cur.Followers, cur.Quorum)
	case rerr != nil:
		return o, fmt.Errorf("fence: recording followers in %s: %w (reading it back: %w)", key, err, rerr)
	}
	return o, fmt.Errorf("fence: recording followers in %s: %w", key, err)
}
