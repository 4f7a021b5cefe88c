package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/tails"
)

// DefaultIdentityCheck is PeersConfig.IdentityCheck when zero: one GET a
// second per node.
const DefaultIdentityCheck = time.Second

// openIdentity records this open of the follower store in the bucket
// (fence.OpenIdentity) before the store serves anyone, and gives the store
// a new ID when the record says it is a copy: a restored backup, a cloned
// machine, or a directory copied while its node ran and opened since.
// The new ID is in no actor's follower set, so none of the copy's promises
// counts (tails, "A directory can be copied").
func openIdentity(ctx context.Context, b bucket.Bucket, store *tails.Store, log *slog.Logger) (fence.Identity, error) {
	ident, err := fence.OpenIdentity(ctx, b, store.ID(), store.Generation())
	if errors.Is(err, fence.ErrIdentityCopied) {
		old, rerr := store.Reidentify()
		if rerr != nil {
			return fence.Identity{}, fmt.Errorf("host: follower store: %w", rerr)
		}
		log.Warn("the follower store is a copy of another: it comes back as a new follower", "old", old, logattr.Follower, store.ID(), logattr.Err, err)
		ident, err = fence.OpenIdentity(ctx, b, store.ID(), 0)
	}
	if err != nil {
		return fence.Identity{}, fmt.Errorf("host: follower identity: %w", err)
	}
	if err := store.SetGeneration(ident.Generation); err != nil {
		return fence.Identity{}, fmt.Errorf("host: follower store: %w", err)
	}
	return ident, nil
}

// identityLoop checks, every PeersConfig.IdentityCheck, that the bucket's
// identity record of the follower store is still this open's. Once it is
// not, a copy of the store opened under its ID since (it took the record
// when it opened), and this node stops (identityTaken). Until the check,
// both may answer as the follower: the window is one IdentityCheck, on
// this node's clock; the copy also fences this node's lease when it
// starts (fence.Node.RetirePredecessors), which stops it at its next
// renewal.
func (h *Host) identityLoop() {
	defer h.bg.Done()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.clock.After(h.cfg.Peers.IdentityCheck):
		}
		if h.identityTaken(h.ctx) {
			return
		}
	}
}

// identityTaken checks the follower identity once and reports whether a
// copy took it; if so it has stopped the host: the follower store answers
// nothing more (quorum.Hub.StopFollowing), so that one ID has one store,
// and the host is done (ErrStopped) rather than registering again, which
// would fence the copy's lease in turn (watchNode). A restart brings the
// node back as a new follower. A check that cannot read the bucket
// reports false.
func (h *Host) identityTaken(ctx context.Context) bool {
	p := h.peers
	err := fence.CheckIdentity(ctx, h.cfg.Bucket, p.identity)
	switch {
	case errors.Is(err, fence.ErrIdentityCopied):
		h.log.Error("another process opened a copy of this node's follower store: this node stops; restart it to come back as a new follower",
			logattr.Follower, p.identity.Follower, logattr.Err, err)
		p.hub.StopFollowing(err)
		h.mu.Lock()
		h.stopLocked(fmt.Errorf("%w: %w", ErrStopped, err))
		h.mu.Unlock()
		return true
	case err != nil && ctx.Err() == nil:
		h.log.Info("checking the follower identity", logattr.Follower, p.identity.Follower, logattr.Err, err)
	}
	return false
}
