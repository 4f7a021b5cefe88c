package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/internal/logattr"
)

// watchNode waits for the node to stop being live. Closed by Close: done.
// Lost (fenced, lease lost): with Config.StopOnNodeLoss the host stops;
// otherwise every open actor is dropped for reopening, a new node is
// registered once the bucket answers (Node.Restart: a new ID, so the old
// node's claims are waited out like anyone's), and the actors are reopened
// on it (framectl.DB.Reopen) as their last Handles are released.
func (h *Host) watchNode() {
	defer h.bg.Done()
	for {
		h.mu.Lock()
		n := h.node
		h.mu.Unlock()
		select {
		case <-n.Done():
		case <-h.ctx.Done():
			return
		}
		err := n.Err()
		if errors.Is(err, fence.ErrClosed) {
			return
		}
		// A copy of the follower store that opened since fences this
		// node's lease when it starts: registering again would fence the
		// copy's in turn, for ever. Whoever holds the identity stays.
		if h.peers != nil && h.identityTaken(h.ctx) {
			return
		}
		h.mu.Lock()
		if h.stopErr != nil {
			h.mu.Unlock()
			return
		}
		h.earlier[n.ID()] = struct{}{}
		h.stats.nodeLost(err)
		if h.cfg.StopOnNodeLoss {
			h.stopLocked(fmt.Errorf("%w: node %s lost: %w", ErrStopped, n.ID(), err))
		} else {
			h.recovered = make(chan struct{})
		}
		for _, a := range h.actors {
			if a.state == Open {
				h.dropLocked(a, err)
			}
		}
		h.mu.Unlock()
		if h.cfg.StopOnNodeLoss {
			h.log.Error("node lost: stopping", logattr.Node, n.ID(), logattr.Err, err)
			return
		}
		h.log.Warn("node lost: registering a new node", logattr.Node, n.ID(), logattr.Err, err)
		next := h.restartNode(n)
		if next != nil && h.peers != nil {
			h.peers.retire(context.Background(), next, h.cfg.Logger) // n's lease, not fenced yet if it expired
		}
		h.mu.Lock()
		stopped := h.stopErr != nil
		if next != nil && !stopped {
			h.node = next
			if h.peers != nil {
				h.peers.leases.SetNode(next)
			}
			if h.draining {
				next.StopClaiming() // before any claim can use it
			}
			h.stats.retired = append(h.stats.retired, n.Observer)
		}
		close(h.recovered)
		h.recovered = nil
		h.mu.Unlock()
		if next == nil {
			return // closing
		}
		if stopped {
			// Close began while it registered: deregister it again.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), closeTimeout)
			next.Close(ctx)
			cancel()
			return
		}
		h.log.Info("recovered: serving as a new node", logattr.Node, next.ID(), "previous", n.ID())
	}
}

// restartNode registers the node anew, retrying until the bucket answers
// or the host closes (nil).
func (h *Host) restartNode(n *fence.Node) *fence.Node {
	delay := retryMin
	limit := max(h.cfg.Lease/2, retryMin)
	for {
		next, err := n.Restart(h.ctx)
		if err == nil {
			return next
		}
		if h.ctx.Err() != nil {
			return nil
		}
		h.log.Warn("registering a new node", logattr.Err, err)
		select {
		case <-h.ctx.Done():
			return nil
		case <-h.clock.After(delay):
		}
		delay = min(2*delay, limit, 5*time.Second)
	}
}
