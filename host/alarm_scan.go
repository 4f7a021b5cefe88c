package host

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// alarmSlack is how overdue an index entry must be before a scan looks at
// it: a live holder runs an alarm at its time and deletes the entry once
// the clear is durable, a few round trips later, so the entries a scan
// finds are alarms whose holder is gone (or failing, or slow), stale
// entries, and alarms of actors nobody holds.
const alarmSlack = time.Second

// alarmScanPage is the page size of a scan's first listing. Entries are
// in due order, so a scan reads only the overdue ones and the next one;
// a first page that is all overdue is followed by pages of the bucket's
// largest (bucket.DefaultPageSize), so that a backlog of overdue entries
// left to other live holders costs a listing per thousand of them.
const alarmScanPage = 100

// maxWarnedKeys bounds the bad index keys remembered as logged already,
// and the failed claims remembered before old ones are pruned.
const maxWarnedKeys = 1024

// alarmScanLoop scans the alarm index of every namespace with a handler
// every Config.AlarmScanEvery (jittered, the first one at a random point
// of the first interval), until the host closes.
func (h *Host) alarmScanLoop() {
	defer h.bg.Done()
	if len(h.cfg.Alarms) == 0 || h.cfg.AlarmScanEvery < 0 {
		return
	}
	every := h.cfg.AlarmScanEvery
	wait := rand.N(every + 1)
	holders := newScanHolders()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.clock.After(wait):
		}
		for ns := range h.cfg.Alarms {
			if err := h.scanAlarms(h.ctx, ns, holders); err != nil && h.ctx.Err() == nil {
				h.log.Warn("scanning alarms", logattr.Namespace, ns, logattr.Err, err)
			}
		}
		wait = every - every/10 + rand.N(every/5+1)
	}
}

// scanAlarms looks at each entry of a namespace's index overdue by
// alarmSlack. A full scan lists from the start of the index, in due
// order, and more pages only while they are overdue; an incremental one
// (nsScan says when) lists only the entries that came due since the
// previous scan, and looks again at the ones it remembers to revisit.
func (h *Host) scanAlarms(ctx context.Context, ns string, holders *scanHolders) error {
	st := holders.of(ns)
	now := h.clock.Now()
	cutoff := now.Add(-alarmSlack)
	pass := st.pass()
	h.mu.Lock()
	node := h.node
	h.mu.Unlock()
	rescans := h.alarmRescans.Load()
	full := st.cutoff.IsZero() || now.Sub(st.full) >= alarmRescanEvery || rescans != st.rescans ||
		st.remembered() >= maxEntriesRemembered || !pass.holdersAlive(ctx, node)
	after := ""
	if !full {
		after = frames.AlarmDueAfter(h.namespaceID(ns), uint64(max(0, st.cutoff.Add(-alarmRelist).UnixMilli())))
	}
	limit := alarmScanPage
	for listing := true; listing; {
		page, err := h.ListAlarms(ctx, ns, after, limit)
		if err != nil {
			return err
		}
		h.warnBadKeys(ns, page.Bad)
		for _, e := range page.Entries {
			if e.Due.After(cutoff) {
				listing = false
				break
			}
			if _, ok := pass.looked[e.Key]; !ok {
				pass.looked[e.Key] = struct{}{}
				h.overdueAlarm(ctx, pass, ns, e)
			}
		}
		listing = listing && page.More
		after, limit = page.Last, bucket.DefaultPageSize
	}
	if full {
		pass.done()
		st.full, st.rescans = now, rescans
	} else {
		for k, e := range st.revisit {
			if _, ok := pass.looked[k]; !ok {
				pass.looked[k] = struct{}{}
				h.overdueAlarm(ctx, pass, ns, e)
			}
		}
	}
	h.recheck(ctx, pass, node)
	st.cutoff = cutoff
	return nil
}

// overdueAlarm acts on an overdue entry. The actor's database says what
// the entry is worth, so whoever holds the actor decides:
//   - held here: the entry is noted for the next settle (which deletes it
//     if the database no longer holds that alarm) and the alarm looked at
//     now (a commit the schedule did not see, a set inside a transaction
//     that committed late);
//   - held by a live node elsewhere: that node's scan does the same (and
//     this one leaves the entry to it, reading own.json again only now
//     and then: nsScan);
//   - held by nobody alive (released, no own.json, or a holder whose lease
//     this node's observer has seen unchanged for Lease+Grace): claimed
//     here (Acquire), which runs the alarm, or deletes the entry if it is
//     stale; not while this host drains (StopClaiming), when it is left
//     to the other nodes.
//
// Any entry neither held here nor left to a live holder is looked at again
// by the next scan.
func (h *Host) overdueAlarm(ctx context.Context, pass *scanPass, ns string, e AlarmEntry) {
	key := actorKey{ns, string(e.Actor)}
	h.mu.Lock()
	if h.stopErr != nil {
		h.mu.Unlock()
		return
	}
	draining := h.draining
	if a := h.actors[key]; a != nil {
		if a.state == Open && !a.drop {
			a.noteEntry(e.Key)
			h.scheduleActorLocked(a, h.clock.Now())
			h.settleSoonLocked(a)
			pass.handedOver(e)
		} else {
			pass.revisit(e)
		}
		h.mu.Unlock()
		return
	}
	if draining {
		// Not claiming: left to the nodes that are not draining.
		h.mu.Unlock()
		pass.revisit(e)
		return
	}
	_, claiming := h.claiming[key]
	failed, hasFailed := h.claimFailed[key]
	node := h.node
	h.mu.Unlock()
	if claiming || hasFailed && h.clock.Now().Before(failed.next) {
		pass.revisit(e)
		return
	}
	if h.leftToHolder(ctx, pass, node, e) || !h.heldByNobody(ctx, pass, node, key, e) {
		return
	}
	pass.revisit(e) // until the claim has opened it here
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.claiming[key]; ok || h.actors[key] != nil || h.stopErr != nil {
		return
	}
	h.claiming[key] = struct{}{}
	h.bg.Add(1)
	go h.claimForAlarm(key, e)
}

// heldByNobody reports whether no live node holds the actor: own.json is
// absent or released, or names a node (not this one) that this node's
// observer finds expired, fenced or gone. The observer remembers what it
// saw, so a holder that died is found dead Lease+Grace after a scan first
// looked at its lease. An entry whose actor a live holder elsewhere holds
// is left to it (leave); one whose holder cannot be judged yet is looked
// at again (revisit).
func (h *Host) heldByNobody(ctx context.Context, pass *scanPass, node *fence.Node, key actorKey, e AlarmEntry) bool {
	actor := frames.Actor{Namespace: h.namespaceID(key.ns), Actor: frames.ActorKey([]byte(key.id))}
	rec, _, err := fence.ReadRecord(ctx, h.cfg.Bucket, actor)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		return true
	case err != nil:
		if ctx.Err() == nil {
			h.log.Warn("alarm scan: reading an actor's owner", logattr.Namespace, key.ns, logattr.Actor, actor.Actor, logattr.Err, err)
		}
		pass.revisit(e)
		return false
	case rec.Released():
		return true
	case rec.Node == node.ID():
		pass.revisit(e)
		return false // opening or closing here
	}
	live, err := pass.judge(ctx, node, rec.Node)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("alarm scan: reading a holder's lease", logattr.Holder, rec.Node, logattr.Err, err)
		}
		pass.revisit(e)
		return false
	}
	switch live {
	case fence.Alive:
		h.leave(pass, key, e, rec.Node)
		return false
	case fence.Unseen:
		pass.revisit(e)
		return false
	}
	return true
}

// claimForAlarm acquires an actor nobody alive holds, for an overdue
// entry of its alarm: the open reads its alarm and schedules it (due: it
// runs at once), and the entry, noted, is deleted by the settle after the
// release if the database does not hold that alarm.
func (h *Host) claimForAlarm(key actorKey, e AlarmEntry) {
	defer h.bg.Done()
	defer func() {
		h.mu.Lock()
		delete(h.claiming, key)
		h.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(h.ctx, openTimeout)
	defer cancel()
	hd, err := h.Acquire(ctx, key.ns, []byte(key.id))
	if err != nil {
		if !errors.Is(err, fence.ErrHeld) && !errors.Is(err, ErrDraining) && h.ctx.Err() == nil {
			wait := h.claimFailedFor(key)
			h.log.Warn("cannot claim an actor for its overdue alarm", logattr.Namespace, key.ns, logattr.Actor, frames.ActorKey([]byte(key.id)),
				"next", wait, logattr.Err, err)
		}
		return
	}
	h.mu.Lock()
	delete(h.claimFailed, key)
	h.mu.Unlock()
	h.log.Info("claimed an actor for its overdue alarm", logattr.Namespace, key.ns, logattr.Actor, frames.ActorKey([]byte(key.id)),
		logattr.Epoch, hd.Epoch(), "due", e.Due, "gen", e.Gen)
	h.mu.Lock()
	hd.noteEntry(e.Key)
	h.scheduleActorLocked(hd.Actor, h.clock.Now())
	h.mu.Unlock()
	hd.Release()
}

// claimFailure is an actor the scan could not open for its alarm: the
// next attempt waits, twice as long after each failure, so that an actor
// whose open keeps failing (a broken Hooks.Opened) is not claimed anew,
// with a new epoch and a first snapshot, on every scan.
type claimFailure struct {
	wait time.Duration
	next time.Time
}

// maxClaimBackoff bounds the wait between the scan's claims of an actor
// whose open keeps failing.
const maxClaimBackoff = 5 * time.Minute

// claimFailedFor records a failed claim of key and returns how long the
// scan now leaves it alone.
func (h *Host) claimFailedFor(key actorKey) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	if len(h.claimFailed) >= maxWarnedKeys {
		for k, f := range h.claimFailed {
			if now.Sub(f.next) > maxClaimBackoff {
				delete(h.claimFailed, k) // claimed elsewhere since, or stale
			}
		}
	}
	f := h.claimFailed[key]
	f.wait = min(max(2*f.wait, h.cfg.AlarmScanEvery), maxClaimBackoff)
	f.next = now.Add(f.wait)
	h.claimFailed[key] = f
	return f.wait
}

// warnBadKeys logs each key under a namespace's index that is not an
// alarm entry, once.
func (h *Host) warnBadKeys(ns string, bad []error) {
	for _, err := range bad {
		var fe *frames.Error
		if !errors.As(err, &fe) {
			continue
		}
		h.mu.Lock()
		_, seen := h.warned[fe.Key]
		if !seen && len(h.warned) < maxWarnedKeys {
			h.warned[fe.Key] = struct{}{}
		}
		h.mu.Unlock()
		if !seen {
			h.log.Warn("alarm scan: not an alarm entry; left alone", logattr.Namespace, ns, logattr.Key, fe.Key, logattr.Err, err)
		}
	}
}
