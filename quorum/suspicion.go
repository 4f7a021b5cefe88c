package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/peer"
)

// ErrNotSuspected: failure detection did not confirm that an actor's
// holder is gone, so a claim must not take the actor from it on
// suspicion (it may still once the holder's lease runs out). The error
// says why: this node hears the holder, has not watched it long enough,
// or no follower of the actor confirmed.
var ErrNotSuspected = errors.New("quorum: holder not confirmed gone")

// Detector is the failure detection of the transport (peer.Node): how long
// since a peer was heard, starting to watch one, and asking another node
// the same question.
type Detector interface {
	AddrSetter
	Silence(id follow.FollowerID) peer.Verdict
	Watch(id follow.FollowerID) error
	Ask(ctx context.Context, observer, subject follow.FollowerID) (peer.Verdict, error)
}

// DefaultAskTimeout bounds how long Confirm waits for the followers'
// answers: a question and its answer are two frames, read as they come
// (never behind a Handler), so a live follower answers within a few
// heartbeats even on a loaded machine.
const DefaultAskTimeout = 300 * time.Millisecond

// Suspicion confirms that an actor's holder is gone, for a claim that
// takes the actor without waiting for the holder's lease
// (fence.ClaimOptions.Suspect). The rule: two observers suspect the
// holder, this node and at least one of the followers own.json records
// for the actor, each having wanted to hear from the holder and heard
// nothing for its SuspectAfter (peer.Config). The followers are the
// observers that matter: the holder streams every commit of the actor to
// them, so they hear it whenever it is alive and connected to them. One
// observer is never enough: a node cut off from the holder alone (its own
// link down) would take actors from a holder that serves them well. A
// holder that is alive but cut off from its followers (a partition) is a
// false suspicion: it loses the actor (its followers, fenced by the
// claimant's takeover, refuse its appends; its proofs of ownership find
// the new own.json), its callers are answered 503 and retry, and nothing
// it acknowledged is lost, because it acknowledged nothing the followers
// or the bucket did not hold.
//
// A holder this node never watched is watched from the first question
// (peer.Node.Watch dials it), so a claim it is asked for is confirmed no
// sooner than SuspectAfter later. An actor without followers, or a holder
// without a peer address, is never confirmed: the claim waits for the
// lease.
type Suspicion struct {
	// Self is this node's follower ID (its transport's).
	Self follow.FollowerID
	// Detector is this node's transport.
	Detector Detector
	// Directory locates the followers asked.
	Directory Directory
	// AskTimeout: DefaultAskTimeout when zero.
	AskTimeout time.Duration
	// Logger (nil: discard).
	Logger *slog.Logger

	confirmed, refused atomic.Uint64
}

// SuspicionStats counts what Confirm concluded.
type SuspicionStats struct {
	Confirmed uint64 // holders confirmed gone: claims taken on suspicion
	Refused   uint64 // questions that did not confirm (ErrNotSuspected)
}

// Stats returns the counts.
func (s *Suspicion) Stats() SuspicionStats {
	return SuspicionStats{Confirmed: s.confirmed.Load(), Refused: s.refused.Load()}
}

// Confirm returns nil if the holder of held, whose lease is lease, is
// confirmed gone by the rule of Suspicion; otherwise an error matching
// ErrNotSuspected that says why (or the context's).
func (s *Suspicion) Confirm(ctx context.Context, held fence.Record, lease fence.Lease) error {
	err := s.confirm(ctx, held, lease)
	if err != nil {
		s.refused.Add(1)
		return err
	}
	s.confirmed.Add(1)
	return nil
}

func (s *Suspicion) confirm(ctx context.Context, held fence.Record, lease fence.Lease) error {
	subject := follow.FollowerID(lease.Follower)
	switch {
	case len(held.Followers) == 0:
		return fmt.Errorf("%w: node %s holds the actor without followers to confirm", ErrNotSuspected, held.Node)
	case subject == "" || lease.Peer == "":
		return fmt.Errorf("%w: node %s serves no follower transport", ErrNotSuspected, held.Node)
	case subject == s.Self:
		return fmt.Errorf("%w: node %s serves this node's follower store", ErrNotSuspected, held.Node)
	}
	v := s.Detector.Silence(subject)
	if !v.Known {
		if err := s.Detector.SetAddr(subject, lease.Peer); err != nil {
			return fmt.Errorf("%w: node %s: %v", ErrNotSuspected, held.Node, err)
		}
		if err := s.Detector.Watch(subject); err != nil {
			return fmt.Errorf("%w: watching node %s: %v", ErrNotSuspected, held.Node, err)
		}
		return fmt.Errorf("%w: node %s: not watched until now", ErrNotSuspected, held.Node)
	}
	if !v.Suspected {
		return fmt.Errorf("%w: node %s was heard %v ago", ErrNotSuspected, held.Node, v.Silence.Round(time.Millisecond))
	}
	wait := s.AskTimeout
	if wait <= 0 {
		wait = DefaultAskTimeout
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	type answer struct {
		from follow.FollowerID
		v    peer.Verdict
		err  error
	}
	var (
		wg      sync.WaitGroup
		answers = make(chan answer, len(held.Followers))
	)
	for _, f := range held.Followers {
		id := follow.FollowerID(f)
		if id == s.Self || id == subject {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Directory.Locate(actx, id); err != nil {
				answers <- answer{from: id, err: err}
				return
			}
			v, err := s.Detector.Ask(actx, id, subject)
			answers <- answer{from: id, v: v, err: err}
		}()
	}
	go func() { wg.Wait(); close(answers) }()
	var heard []string
	for a := range answers {
		switch {
		case a.err != nil:
			heard = append(heard, fmt.Sprintf("%s: %v", a.from, a.err))
		case a.v.Suspected:
			cancel() // one is enough; the others' goroutines end with actx
			s.log().Info("holder confirmed gone", logattr.Holder, held.Node, "observer", string(a.from),
				"silence", a.v.Silence.Round(time.Millisecond), "own_silence", v.Silence.Round(time.Millisecond))
			return nil
		case a.v.Known:
			heard = append(heard, fmt.Sprintf("%s heard it %v ago", a.from, a.v.Silence.Round(time.Millisecond)))
		default:
			heard = append(heard, fmt.Sprintf("%s never watched it", a.from))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: node %s, silent here for %v, is not confirmed by a follower (%v)", ErrNotSuspected, held.Node,
		v.Silence.Round(time.Millisecond), heard)
}

func (s *Suspicion) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
