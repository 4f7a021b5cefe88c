package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// Acknowledgement by the bucket needs proof that the session still owns
// the actor when its upload landed (package fence, "Proof of ownership"):
// a read of own.json, begun after the upload landed, that still names the
// session's claim. The lease clock cannot give it: a machine whose clock
// stopped while it was away believes its lease valid after a peer claimed
// the actor, and its batch PUTs are unconditional.
//
// A prover makes those reads for one session, only when someone waits,
// one at a time: a read covers every upload that landed before it began,
// so the Durable calls and Sync commits waiting meanwhile share the next
// one, and a writer that never waits pays nothing. Without a node (the
// caller guarantees the session is the only writer) there is nothing to
// prove.
//
// A Durable with nothing new to acknowledge (every commit it covers was
// acknowledged to some caller before: a read-only reply at the host's
// output gate) asks a different question, "does this session still own
// the actor?", and in either mode passes on a read of own.json begun less
// than Config.ReadProofAge ago, measured on this process's monotonic
// clock, and makes one otherwise. A read may be that stale, or as stale as
// that clock is wrong; a write is never acknowledged on an old proof.
type prover struct {
	confirm func(context.Context) error // nil: no node, nothing to prove
	maxAge  time.Duration               // Config.ReadProofAge
	stats   *counters
	observe func(took time.Duration, err error) // Observer.Proof, or nil

	mu     sync.Mutex
	proven frames.Seq    // every commit up to proven is proven
	at     time.Time     // when the read that proved it began
	round  chan struct{} // non-nil while a read runs; closed when it ends
}

// proofRetry bounds the wait between failed reads of own.json (a bucket
// that does not answer): the waiters keep trying until their context
// ends, as uploads do.
const (
	proofRetryMin = 20 * time.Millisecond
	proofRetryMax = time.Second
)

// prove returns once every commit up to target is proven, target being in
// the bucket already (durable() ≥ target); or, when reread (target was
// acknowledged before), once a read begun less than maxAge ago found the
// claim. durable is read at the start of each read of own.json: what it
// covers. A read that finds another claim returns an error matching
// ErrFenced; the caller stops replication.
func (p *prover) prove(ctx context.Context, target frames.Seq, reread bool, durable func() frames.Seq) error {
	if p.confirm == nil {
		return nil
	}
	wait := proofRetryMin
	for {
		p.mu.Lock()
		if (!reread && p.proven >= target) || (reread && !p.at.IsZero() && time.Since(p.at) < p.maxAge) {
			// A read begun after target landed found the claim; or the
			// claim was found recently enough for a read-only reply.
			p.mu.Unlock()
			return nil
		}
		if ch := p.round; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
				continue // it may have covered target
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		covers, began := durable(), time.Now()
		ch := make(chan struct{})
		p.round = ch
		p.mu.Unlock()

		p.stats.proofs.Add(1)
		err := p.confirm(ctx)
		if p.observe != nil {
			p.observe(time.Since(began), err)
		}

		p.mu.Lock()
		p.round = nil
		close(ch)
		if err == nil {
			// Rounds run one at a time, so began only grows.
			p.proven, p.at = max(p.proven, covers), began
		}
		p.mu.Unlock()
		switch {
		case err == nil:
			return nil // covers ≥ target, and the read is as fresh as can be
		case errors.Is(err, fence.ErrFenced):
			return fmt.Errorf("%w: %w", ErrFenced, err)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		p.stats.proofErrors.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("session: proving sequence %d durable: %w (last read: %w)", target, ctx.Err(), err)
		}
		wait = min(2*wait, proofRetryMax)
	}
}
