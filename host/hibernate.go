package host

import "time"

// whyIdle is the reason of a close for being idle: a hibernation.
const whyIdle = "idle"

// hibernateLoop closes actors idle for Config.Idle, until the host closes.
// It looks a few times per idle period (at most once a second, at least
// every 10 ms), so an actor closes at most a quarter period late.
func (h *Host) hibernateLoop() {
	defer h.bg.Done()
	if h.cfg.Idle < 0 {
		return
	}
	every := min(max(h.cfg.Idle/4, 10*time.Millisecond), time.Second)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.clock.After(every):
		}
		h.hibernate(h.clock.Now())
	}
}

// hibernate closes every open actor without a Handle whose last one was
// released Config.Idle before now.
func (h *Host) hibernate(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopErr != nil {
		return
	}
	for _, a := range h.actors {
		// An alarm waiting for its retry keeps the actor: its retry count
		// would start over on the next open.
		if a.state == Open && a.refs == 0 && !a.alarm.Retrying() && now.Sub(a.lastUsed) >= h.cfg.Idle {
			h.closeLocked(a, whyIdle)
		}
	}
}
