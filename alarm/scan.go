package alarm

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

// slack is how overdue an index entry must be before a scan looks at
// it: a live holder runs an alarm at its time and deletes the entry once
// the clear is durable, a few round trips later, so the entries a scan
// finds are alarms whose holder is gone (or failing, or slow), stale
// entries, and alarms of actors nobody holds.
const slack = time.Second

// scanPage is the page size of a scan's first listing. Entries are
// in due order, so a scan reads only the overdue ones and the next one;
// a first page that is all overdue is followed by pages of the bucket's
// largest (bucket.DefaultPageSize), so that a backlog of overdue entries
// left to other live holders costs a listing per thousand of them.
const scanPage = 100

// maxWarnedKeys bounds the bad index keys remembered as logged already,
// and the failed claims remembered before old ones are pruned.
const maxWarnedKeys = 1024

// acquireTimeout bounds an Acquire of the scan's or a wake-up's: a
// claim, a restore, a first snapshot upload (the host's own open has the
// same bound).
const acquireTimeout = 5 * time.Minute

// scanLoop scans the alarm index of every namespace with a handler every
// Config.ScanEvery (jittered, the first one at a random point of the first
// interval), until ctx ends.
func (svc *Service) scanLoop() {
	defer svc.bg.Done()
	if len(svc.handled) == 0 || svc.cfg.ScanEvery < 0 {
		return
	}
	every := svc.cfg.ScanEvery
	wait := rand.N(every + 1)
	holders := newScanHolders()
	for {
		select {
		case <-svc.ctx.Done():
			return
		case <-svc.clock.After(wait):
		}
		for ns := range svc.handled {
			if err := svc.scan(svc.ctx, ns, holders); err != nil && svc.ctx.Err() == nil {
				svc.log.Warn("scanning alarms", logattr.Namespace, ns, logattr.Err, err)
			}
		}
		wait = every - every/10 + rand.N(every/5+1)
	}
}

// scan looks at each entry of a namespace's index overdue by slack. A
// full scan lists from the start of the index, in due order, and more
// pages only while they are overdue; an incremental one (nsScan says
// when) lists only the entries that came due since the previous scan, and
// looks again at the ones it remembers to revisit.
func (svc *Service) scan(ctx context.Context, ns string, holders *scanHolders) error {
	st := holders.of(ns)
	now := svc.clock.Now()
	cutoff := now.Add(-slack)
	pass := st.pass()
	node := svc.host.Node()
	rescans := svc.rescans.Load()
	full := st.cutoff.IsZero() || now.Sub(st.full) >= rescanEvery || rescans != st.rescans ||
		st.remembered() >= maxEntriesRemembered || !pass.holdersAlive(ctx, node)
	after := ""
	if !full {
		after = frames.AlarmDueAfter(svc.namespaceID(ns), uint64(max(0, st.cutoff.Add(-relist).UnixMilli())))
	}
	limit := scanPage
	for listing := true; listing; {
		page, err := svc.List(ctx, ns, after, limit)
		if err != nil {
			return err
		}
		svc.warnBadKeys(ns, page.Bad)
		for _, e := range page.Entries {
			if e.Due.After(cutoff) {
				listing = false
				break
			}
			if _, ok := pass.looked[e.Key]; !ok {
				pass.looked[e.Key] = struct{}{}
				svc.overdue(ctx, pass, ns, e)
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
				svc.overdue(ctx, pass, ns, e)
			}
		}
	}
	svc.recheck(ctx, pass, node)
	st.cutoff = cutoff
	return nil
}

// overdue acts on an overdue entry. The actor's database says what the
// entry is worth, so whoever holds the actor decides:
//   - serving here: the entry is noted for the next settle (which deletes
//     it if the database no longer holds that alarm) and the alarm looked
//     at now (a commit the schedule did not see, a set inside a
//     transaction that committed late);
//   - held by a live node elsewhere: that node's scan does the same (and
//     this one leaves the entry to it, reading own.json again only now
//     and then: nsScan);
//   - held by nobody alive (released, no own.json, or a holder whose lease
//     this node's observer has seen unchanged for Lease+Grace): claimed
//     here (Host.Acquire), which runs the alarm, or deletes the entry if
//     it is stale; not while the host drains, when it is left to the
//     other nodes.
//
// Any entry neither serving here nor left to a live holder is looked at
// again by the next scan.
func (svc *Service) overdue(ctx context.Context, pass *scanPass, ns string, e Entry) {
	key := Key{ns, string(e.Actor)}
	// Asked before svc.mu is taken: the host's lock comes first.
	draining := svc.host.Draining()
	svc.mu.Lock()
	if svc.stopped {
		svc.mu.Unlock()
		return
	}
	if s := svc.sessions[key]; s != nil {
		settle := false
		if s.phase == serving {
			s.noteEntry(e.Key)
			svc.scheduleSessionLocked(s, svc.clock.Now())
			settle = s.settleSoonLocked()
			pass.handedOver(e)
		} else {
			pass.revisit(e)
		}
		svc.mu.Unlock()
		if settle {
			s.startSettle(s.actor.Use())
		}
		return
	}
	if draining {
		// Not claiming: left to the nodes that are not draining.
		svc.mu.Unlock()
		pass.revisit(e)
		return
	}
	_, claiming := svc.claiming[key]
	failed, hasFailed := svc.claimFailed[key]
	svc.mu.Unlock()
	if claiming || hasFailed && svc.clock.Now().Before(failed.next) {
		pass.revisit(e)
		return
	}
	node := svc.host.Node()
	if svc.leftToHolder(ctx, pass, node, e) || !svc.heldByNobody(ctx, pass, node, key, e) {
		return
	}
	pass.revisit(e) // until the claim has opened it here
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if _, ok := svc.claiming[key]; ok || svc.sessions[key] != nil || svc.stopped {
		return
	}
	svc.claiming[key] = struct{}{}
	svc.bg.Add(1)
	go svc.claimForAlarm(key, e)
}

// heldByNobody reports whether no live node holds the actor: own.json is
// absent or released, or names a node (not this one) that this node's
// observer finds expired, fenced or gone. The observer remembers what it
// saw, so a holder that died is found dead Lease+Grace after a scan first
// looked at its lease. An entry whose actor a live holder elsewhere holds
// is left to it (leave); one whose holder cannot be judged yet is looked
// at again (revisit).
func (svc *Service) heldByNobody(ctx context.Context, pass *scanPass, node *fence.Node, key Key, e Entry) bool {
	actor := svc.actorOf(key)
	rec, _, err := fence.ReadRecord(ctx, svc.cfg.Bucket, actor)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		return true
	case err != nil:
		if ctx.Err() == nil {
			svc.log.Warn("alarm scan: reading an actor's owner", logattr.Namespace, key.Namespace, logattr.Actor, actor.Actor, logattr.Err, err)
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
			svc.log.Warn("alarm scan: reading a holder's lease", logattr.Holder, rec.Node, logattr.Err, err)
		}
		pass.revisit(e)
		return false
	}
	switch live {
	case fence.Alive:
		svc.leave(pass, key, e, rec.Node)
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
func (svc *Service) claimForAlarm(key Key, e Entry) {
	defer svc.bg.Done()
	defer func() {
		svc.mu.Lock()
		delete(svc.claiming, key)
		svc.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(svc.ctx, acquireTimeout)
	defer cancel()
	s, release, err := svc.host.Acquire(ctx, key)
	if err != nil {
		if worthAWarning(err) && svc.ctx.Err() == nil {
			wait := svc.claimFailedFor(key)
			svc.log.Warn("cannot claim an actor for its overdue alarm", logattr.Namespace, key.Namespace, logattr.Actor, key.hex(),
				"next", wait, logattr.Err, err)
		}
		return
	}
	svc.mu.Lock()
	delete(svc.claimFailed, key)
	svc.mu.Unlock()
	svc.log.Info("claimed an actor for its overdue alarm", logattr.Namespace, key.Namespace, logattr.Actor, key.hex(),
		logattr.Epoch, s.actor.Epoch(), "due", e.Due, "gen", e.Gen)
	svc.mu.Lock()
	s.noteEntry(e.Key)
	svc.scheduleSessionLocked(s, svc.clock.Now())
	svc.mu.Unlock()
	release()
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
func (svc *Service) claimFailedFor(key Key) time.Duration {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	now := svc.clock.Now()
	if len(svc.claimFailed) >= maxWarnedKeys {
		for k, f := range svc.claimFailed {
			if now.Sub(f.next) > maxClaimBackoff {
				delete(svc.claimFailed, k) // claimed elsewhere since, or stale
			}
		}
	}
	f := svc.claimFailed[key]
	f.wait = min(max(2*f.wait, svc.cfg.ScanEvery), maxClaimBackoff)
	f.next = now.Add(f.wait)
	svc.claimFailed[key] = f
	return f.wait
}

// warnBadKeys logs each key under a namespace's index that is not an
// alarm entry, once.
func (svc *Service) warnBadKeys(ns string, bad []error) {
	for _, err := range bad {
		var fe *frames.Error
		if !errors.As(err, &fe) {
			continue
		}
		svc.mu.Lock()
		_, seen := svc.warned[fe.Key]
		if !seen && len(svc.warned) < maxWarnedKeys {
			svc.warned[fe.Key] = struct{}{}
		}
		svc.mu.Unlock()
		if !seen {
			svc.log.Warn("alarm scan: not an alarm entry; left alone", logattr.Namespace, ns, logattr.Key, fe.Key, logattr.Err, err)
		}
	}
}
