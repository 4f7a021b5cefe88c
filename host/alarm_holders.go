package host

import (
	"context"
	"time"

	"github.com/framectl/framectl/fence"
)

// maxHoldersRemembered bounds the actors a scan remembers as held by a live
// node elsewhere; past it, the others' own.json is read on every scan.
const maxHoldersRemembered = 1 << 16

// holderSeen is an actor whose overdue alarm a scan left to a live holder
// elsewhere: its own.json named node, and is read again from next on.
type holderSeen struct {
	node string
	wait time.Duration
	next time.Time
}

// scanHolders is what the alarm scans know of the holders of the overdue
// entries they leave alone, so that an entry a live node elsewhere keeps
// overdue (its handler runs long or retries, or it has no handler for the
// namespace) does not cost two reads on every scan. The holder's lease is
// read once per scan per node (scanPass), and the actor's own.json again
// only after Lease+Grace, then twice as long each time the same live node
// still holds it, up to maxClaimBackoff: the read catches a holder that
// released the actor without running its alarm (one without a handler
// that hibernated it), which the scans then claim that much later at
// most. A holder that dies, drains or closes changes its lease (stale,
// fenced, deleted), which the next scan sees: its actors' own.json is
// read again at once. Used by the scan's goroutine only.
type scanHolders struct {
	seen map[actorKey]holderSeen
}

func newScanHolders() *scanHolders { return &scanHolders{seen: map[actorKey]holderSeen{}} }

// scanPass is one scan of one namespace: the holders' liveness judged in
// it (once per node), and the actors it looked at.
type scanPass struct {
	holders *scanHolders
	judged  map[string]fence.Liveness
	looked  map[actorKey]struct{}
}

func (s *scanHolders) pass() *scanPass {
	return &scanPass{holders: s, judged: map[string]fence.Liveness{}, looked: map[actorKey]struct{}{}}
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

// leftToHolder reports whether an actor's overdue entry can be left to the
// live node elsewhere that held it when own.json was last read, without
// reading it again now.
func (h *Host) leftToHolder(ctx context.Context, p *scanPass, node *fence.Node, key actorKey) bool {
	p.looked[key] = struct{}{}
	s, ok := p.holders.seen[key]
	if !ok || !h.clock.Now().Before(s.next) || s.node == node.ID() {
		return false
	}
	live, err := p.judge(ctx, node, s.node)
	return err == nil && live == fence.Alive
}

// heldBy records what own.json said of an actor: a live holder elsewhere
// (holder not "") is remembered, anything else forgotten.
func (h *Host) heldBy(p *scanPass, key actorKey, holder string) {
	s, ok := p.holders.seen[key]
	if holder == "" {
		delete(p.holders.seen, key)
		return
	}
	if !ok && len(p.holders.seen) >= maxHoldersRemembered {
		return
	}
	if ok && s.node == holder {
		s.wait = min(2*s.wait, maxClaimBackoff)
	} else {
		s = holderSeen{node: holder, wait: h.cfg.Lease + h.cfg.Grace}
	}
	s.next = h.clock.Now().Add(s.wait)
	p.holders.seen[key] = s
}

// done forgets the actors of namespace ns that a complete pass did not
// look at: their entries are gone or no longer overdue.
func (p *scanPass) done(ns string) {
	for key := range p.holders.seen {
		if _, ok := p.looked[key]; !ok && key.ns == ns {
			delete(p.holders.seen, key)
		}
	}
}
