package quorum

import (
	"context"
	"errors"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// ClaimReadTimeout bounds the read of own.json that admit makes. A read
// that fails or runs out drops the message, as a lost one: its sender
// sends it again (follow.DefaultRetransmit).
const ClaimReadTimeout = 5 * time.Second

// admit is this node's follower store checking, before it takes a Fence or
// a reset that would raise actor's promise, that the bucket shows an owner
// of the message's epoch: actor's own.json at that epoch or a newer one.
// A promise is a refusal of every older epoch for good, so one given to
// anyone who holds the cluster key (a Fence for epoch 2^64-1) would brick
// the actor; a claimant writes own.json before its first message, so a
// correct owner always passes. The message names the actor as the bucket
// does (follow.Fence.Actor), which must be the actor the transport
// delivered it for.
//
// ok is false when the message must not reach the store: refusal is then
// the RefuseUnproven to send, or nil when the bucket could not be read
// (dropped). One read per raise: once the store promised an epoch, every
// message of it is admitted without one.
func (h *Hub) admit(from follow.FollowerID, actor string, m follow.Message) (refusal follow.Message, ok bool) {
	var epoch frames.Epoch
	var named string
	switch m := m.(type) {
	case *follow.Fence:
		epoch, named = m.Epoch, m.Actor
	case *follow.Append:
		if !m.Reset {
			return nil, true // raises nothing (follow: "The follower")
		}
		epoch, named = m.Epoch, m.Actor
	default:
		return nil, true
	}
	st, err := h.cfg.Store.Load(actor)
	if err != nil || epoch <= st.Promised {
		// A store that cannot read the actor refuses it itself (Handle).
		return nil, true
	}
	unproven := func(why string, err error) (follow.Message, bool) {
		h.stats.unproven.Add(1)
		h.log.Warn("follower: refused a raise the bucket does not show", logattr.Actor, actor, "from", from,
			logattr.Epoch, epoch, "why", why, logattr.Err, err)
		return &follow.Refuse{Epoch: epoch, Reason: follow.RefuseUnproven, Newest: st.Promised, End: st.End()}, false
	}
	a, err := frames.ParseActor(named)
	switch {
	case named == "":
		return unproven("it names no actor", nil)
	case err != nil:
		return unproven("its actor does not parse", err)
	case ActorName(a) != actor:
		return unproven("it names another actor: "+a.String(), nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ClaimReadTimeout)
	defer cancel()
	claimed, err := h.cfg.Directory.Claimed(ctx, a)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		return unproven("own.json is missing", err)
	case err != nil:
		h.stats.claimReadErrors.Add(1)
		h.log.Info("follower: reading own.json to check a raise", logattr.Actor, actor, logattr.Epoch, epoch, logattr.Err, err)
		return nil, false
	case claimed < epoch:
		return unproven("own.json is at epoch "+claimed.String(), nil)
	}
	return nil, true
}
