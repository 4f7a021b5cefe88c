package fence

import (
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/bucket"
)

// Confirm reads own.json once and returns nil if it still names claim o:
// o's epoch, held by this node. It is the proof an acknowledgement by the
// bucket rests on ("Proof of ownership" in the package documentation):
// begun after an upload landed, a Confirm that returns nil proves that no
// claim had replaced o when the upload landed, so the claimant, which
// lists the log after its own write, finds the upload. It is never judged
// by a clock.
//
// own.json naming anything else (a newer epoch, another node, released) or
// absent is an error matching ErrFenced that says what it names: a claim
// may have landed, and nothing uploaded from now on is acknowledged. A
// record that does not parse matches ErrBadRecord, and a failed read is
// returned as it is: neither proves anything, and neither proves a fence
// (retry).
//
// Records this node rewrote at o's epoch (RecordFollowers) still name o:
// epochs only grow, and every claim writes a newer one, so a record at
// o's epoch naming this node was written by o's holder.
func (n *Node) Confirm(ctx context.Context, o Ownership) error {
	key := o.Actor.OwnKey()
	cur, _, err := ReadRecord(ctx, n.b, o.Actor)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		return fmt.Errorf("%w: %s is gone while this node held epoch %d", ErrFenced, key, o.Epoch)
	case err != nil:
		return fmt.Errorf("fence: confirming epoch %d in %s: %w", o.Epoch, key, err)
	case cur.Epoch != o.Epoch || cur.Node != n.id:
		return fmt.Errorf("%w: %s names epoch %d (node %q) while this node held epoch %d", ErrFenced, key, cur.Epoch, cur.Node, o.Epoch)
	}
	return nil
}
