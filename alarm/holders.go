package alarm

import (
	"context"
	"errors"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// maxEntriesRemembered bounds the overdue entries a namespace's scans
// remember (left to a live holder, or to look at again); past it, every
// scan of the namespace lists its whole overdue backlog again.
const maxEntriesRemembered = 1 << 16

// rescanEvery is how often a namespace's scan lists its whole
// overdue backlog even though nothing asked for it: for entries written
// due long ago after the previous scans listed past their time, whose
// holder then dies or releases the actor without running them (an open
// that reindexes an old alarm, a set for a time long past), and to forget
// entries deleted meanwhile.
const rescanEvery = 5 * time.Minute

// relist is how far before the previous scan's cutoff an
// incremental scan starts listing: an entry written due just before it
// (a PUT that took long, a writer whose clock is behind this one's) is
// still listed.
const relist = 10 * time.Second

// rechecksPerScan bounds the own.json reads a scan spends on entries
// left to a live holder, to catch a holder that released the actor
// without running its overdue alarm and stays alive (one without the
// namespace's handler): at most this many per scan, the longest unchecked
// first, each at most once per Lease+Grace.
const rechecksPerScan = 4

// leftEntry is an overdue entry that a scan left to the live node
// elsewhere that own.json named when it was last read (checked); n
// matches its place in nsScan.queue.
type leftEntry struct {
	actor   Key
	node    string
	checked time.Time
	n       uint64
}

type queued struct {
	key string
	n   uint64
}

// nsScan is what the scans of one namespace remember between them, so
// that an overdue backlog left to live holders elsewhere costs a scan
// nothing per entry: no listing (an incremental scan lists only from
// just before the previous scan's cutoff: the entries that came due
// since), no own.json (a live holder runs its actors' alarms), and the
// holders' leases once per holder. The backlog is listed again (a full
// scan) when a holder of a remembered entry is no longer alive (it died,
// drained, closed: its entries are looked at anew, and the entries it
// deleted meanwhile are not), when a recheck or a wake-up asks for it,
// and every rescanEvery. Used by the scan's goroutine only.
type nsScan struct {
	left    map[string]leftEntry // entry key → its live holder elsewhere
	queue   []queued             // left's keys, longest unchecked first
	revisit map[string]Entry     // overdue entries every scan looks at again
	cutoff  time.Time            // the previous complete scan's; zero: none yet
	full    time.Time            // when the last full scan began
	rescans uint64               // Service.rescans at the last full scan
	nextN   uint64
}

// scanHolders is what the alarm scans of every namespace remember.
type scanHolders struct {
	ns map[string]*nsScan
}

func newScanHolders() *scanHolders { return &scanHolders{ns: map[string]*nsScan{}} }

func (s *scanHolders) of(ns string) *nsScan {
	st := s.ns[ns]
	if st == nil {
		st = &nsScan{left: map[string]leftEntry{}, revisit: map[string]Entry{}}
		s.ns[ns] = st
	}
	return st
}

// remembered is how many entries of the namespace its scans remember.
func (st *nsScan) remembered() int { return len(st.left) + len(st.revisit) }

// scanPass is one scan of one namespace: the holders' liveness judged in
// it (once per node), and the entries it looked at.
type scanPass struct {
	st     *nsScan
	judged map[string]fence.Liveness
	looked map[string]struct{}
}

func (st *nsScan) pass() *scanPass {
	return &scanPass{st: st, judged: map[string]fence.Liveness{}, looked: map[string]struct{}{}}
}

// judge judges a node's lease once per pass.
func (p *scanPass) judge(ctx context.Context, node *fence.Node, id string) (fence.Liveness, error) {
	if live, ok := p.judged[id]; ok {
		return live, nil
	}
	live, _, err := node.Observer.Judge(ctx, id)
	if err != nil {
		return 0, err
	}
	p.judged[id] = live
	return live, nil
}

// holdersAlive judges the holder of every remembered entry left to one,
// once each, and reports whether all are alive: if one is not, its
// entries need a look, and a full scan gives it (listing only those that
// still exist).
func (p *scanPass) holdersAlive(ctx context.Context, node *fence.Node) bool {
	for _, l := range p.st.left {
		if live, err := p.judge(ctx, node, l.node); err != nil || live != fence.Alive {
			return false
		}
	}
	return true
}

// leftToHolder reports whether an overdue entry can be left to the live
// node elsewhere that held its actor when own.json was last read, without
// reading it again now.
func (svc *Service) leftToHolder(ctx context.Context, p *scanPass, node *fence.Node, e Entry) bool {
	l, ok := p.st.left[e.Key]
	if !ok || l.node == node.ID() {
		return false
	}
	live, err := p.judge(ctx, node, l.node)
	return err == nil && live == fence.Alive
}

// leave remembers an entry as left to a live holder elsewhere, checked
// now.
func (svc *Service) leave(p *scanPass, key Key, e Entry, holder string) {
	st := p.st
	delete(st.revisit, e.Key)
	if _, ok := st.left[e.Key]; !ok && st.remembered() >= maxEntriesRemembered {
		return
	}
	st.nextN++
	st.left[e.Key] = leftEntry{actor: key, node: holder, checked: svc.clock.Now(), n: st.nextN}
	st.queue = append(st.queue, queued{key: e.Key, n: st.nextN})
	if len(st.queue) > 2*len(st.left)+64 {
		// Compact the places of entries forgotten or checked again.
		q := st.queue[:0]
		for _, it := range st.queue {
			if l, ok := st.left[it.key]; ok && l.n == it.n {
				q = append(q, it)
			}
		}
		st.queue = q
	}
}

// revisit remembers an entry as one that every scan looks at again (its
// actor is being claimed, or could not be, or its holder could not be
// judged, or is not yet claimable).
func (p *scanPass) revisit(e Entry) {
	delete(p.st.left, e.Key)
	if _, ok := p.st.revisit[e.Key]; ok || p.st.remembered() < maxEntriesRemembered {
		p.st.revisit[e.Key] = e
	}
}

// handedOver forgets an entry: the actor serves here, and this node's
// own schedule and settles look after its alarm from now on.
func (p *scanPass) handedOver(e Entry) {
	delete(p.st.left, e.Key)
	delete(p.st.revisit, e.Key)
}

// done forgets the entries a complete full pass did not list: they are
// gone, or no longer overdue.
func (p *scanPass) done() {
	for k := range p.st.left {
		if _, ok := p.looked[k]; !ok {
			delete(p.st.left, k)
		}
	}
	for k := range p.st.revisit {
		if _, ok := p.looked[k]; !ok {
			delete(p.st.revisit, k)
		}
	}
}

// recheck reads the own.json of at most rechecksPerScan entries left
// to a live holder and not checked for Lease+Grace, longest unchecked
// first. One that the same or another live node elsewhere still holds is
// left to it again; any other whose entry still exists is looked at by
// the next scan (revisit); one whose entry is gone is forgotten.
func (svc *Service) recheck(ctx context.Context, p *scanPass, node *fence.Node) {
	st := p.st
	now := svc.clock.Now()
	for done := 0; done < rechecksPerScan && len(st.queue) > 0; {
		it := st.queue[0]
		l, ok := st.left[it.key]
		if !ok || l.n != it.n {
			st.queue = st.queue[1:]
			continue
		}
		if now.Sub(l.checked) < svc.cfg.Lease+svc.cfg.Grace {
			return
		}
		st.queue = st.queue[1:]
		done++
		k, err := frames.ParseKey(it.key)
		if err != nil {
			delete(st.left, it.key) // only keys List parsed are left
			continue
		}
		e := Entry{Key: it.key, Actor: []byte(l.actor.ID), Due: time.UnixMilli(int64(k.Due)), Gen: k.Gen}
		holder, err := svc.liveHolder(ctx, p, node, l.actor)
		switch {
		case err != nil:
			st.queue = append(st.queue, it) // again later
		case holder != "":
			svc.leave(p, l.actor, e, holder)
		default:
			if _, err := svc.cfg.Bucket.Stat(ctx, it.key); errors.Is(err, bucket.ErrNotFound) {
				delete(st.left, it.key)
			} else {
				p.revisit(e)
			}
		}
	}
}

// liveHolder returns the live node other than this one that own.json
// names as the actor's holder, "" if none does.
func (svc *Service) liveHolder(ctx context.Context, p *scanPass, node *fence.Node, key Key) (string, error) {
	rec, _, err := fence.ReadRecord(ctx, svc.cfg.Bucket, svc.actorOf(key))
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case rec.Released() || rec.Node == node.ID():
		return "", nil
	}
	live, err := p.judge(ctx, node, rec.Node)
	if err != nil || live != fence.Alive {
		return "", err
	}
	return rec.Node, nil
}
