package host

import (
	"math/rand/v2"

	"github.com/framectl/framectl/internal/logattr"
)

// sweepLoop deletes stale leases every Config.SweepEvery (jittered, so the
// nodes of a cluster started together do not sweep together), until the
// host closes. fence.SweepLeases keeps the lease of every node an own.json
// names, so a sweep never deletes evidence a claimant judges; it runs only
// when a lease turned stale since the last one (sweptKept).
func (h *Host) sweepLoop() {
	defer h.bg.Done()
	if h.cfg.SweepAge < 0 {
		return
	}
	every := h.cfg.SweepEvery
	wait := rand.N(every + 1)
	var kept sweptKept
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.clock.After(wait):
		}
		deleted, err := sweep(h.ctx, h.cfg.Bucket, &kept, h.cfg.SweepAge, h.clock.Now())
		switch {
		case err != nil && h.ctx.Err() == nil:
			h.log.Warn("sweeping stale leases", "deleted", len(deleted), logattr.Err, err)
		case len(deleted) > 0:
			h.log.Info("swept stale leases", "deleted", len(deleted), "olderThan", h.cfg.SweepAge)
		}
		wait = every - every/10 + rand.N(every/5+1)
	}
}
