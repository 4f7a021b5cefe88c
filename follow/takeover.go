package follow

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/framectl/framectl/frames"
)

// DefaultWait is TakeoverConfig.Wait when zero.
const DefaultWait = 10 * time.Second

// TakeoverConfig says what a new owner takes over.
type TakeoverConfig struct {
	// Epoch is the new owner's epoch, from its claim of own.json.
	Epoch frames.Epoch
	// Quorum (q) and Followers (the n of the set) are what own.json
	// recorded when the claim read it.
	Quorum    int
	Followers []FollowerID
	// Bucket is the bucket's durable point, read after the claim: the end
	// of the history a restore of the bucket gives, and its chain value.
	Bucket Point
	// Wait bounds how long the takeover waits for n-q+1 answers before it
	// fails with a *TooFewAnswersError. Default DefaultWait.
	Wait time.Duration
	// Retransmit: a follower that has not answered this long is sent the
	// fence again. Default DefaultRetransmit.
	Retransmit time.Duration
	// Actor is set on every Fence (Fence.Actor).
	Actor string
}

// Recovery is what a takeover recovered: the new owner's log, which
// contains every commit any older epoch acknowledged, and the set it
// continues with. NewOwner starts from it.
type Recovery struct {
	Epoch     frames.Epoch
	Quorum    int
	Followers []FollowerID
	// Base is the bucket's durable point; Tail the commits past it, chained
	// from it, from the log of follower From ("" when no answer held
	// anything past the bucket that chains from it).
	Base Point
	Tail []Entry
	From FollowerID
}

// Takeover is a new owner's first step, without I/O: fence the old epoch at
// the followers of the set and recover the tail they hold. It sends a Fence
// to every follower (Outbox, again every Retransmit to those that have not
// answered), and is done (Done) once n-q+1 of them promised, when it picks
// the tail, or once Wait passed without that many (*TooFewAnswersError), or
// once a follower says a newer epoch fenced this one (*SupersededError).
type Takeover struct {
	cfg      TakeoverConfig
	started  time.Time
	asked    map[FollowerID]time.Time
	answers  map[FollowerID]*Promise
	broken   map[FollowerID]bool
	unproven map[FollowerID]bool
	out      []Envelope
	done     bool
	recovery Recovery
	err      error
}

// NewTakeover starts a takeover and queues its fences.
func NewTakeover(cfg TakeoverConfig, now time.Time) (*Takeover, error) {
	if err := checkSet(cfg.Epoch, cfg.Quorum, cfg.Followers); err != nil {
		return nil, err
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Retransmit <= 0 {
		cfg.Retransmit = DefaultRetransmit
	}
	cfg.Followers = slices.Clone(cfg.Followers)
	t := &Takeover{cfg: cfg, started: now, asked: map[FollowerID]time.Time{}, answers: map[FollowerID]*Promise{}, broken: map[FollowerID]bool{}, unproven: map[FollowerID]bool{}}
	t.fence(now)
	return t, nil
}

// Need is how many answers a takeover waits for: n-q+1, the fewest that
// share a follower with every q followers of the set.
func Need(n, q int) int {
	if faults.fewerAnswers {
		return n - q
	}
	return n - q + 1
}

// Outbox returns the messages to send, and forgets them.
func (t *Takeover) Outbox() []Envelope {
	out := t.out
	t.out = nil
	return out
}

// Done returns the recovery once the takeover succeeded, its error once it
// failed, and false while it still waits.
func (t *Takeover) Done() (Recovery, error, bool) { return t.recovery, t.err, t.done }

// Answered returns the followers that promised, sorted.
func (t *Takeover) Answered() []FollowerID { return slices.Sorted(maps.Keys(t.answers)) }

// Receive takes a follower's answer.
func (t *Takeover) Receive(from FollowerID, m Message) {
	if t.done || !slices.Contains(t.cfg.Followers, from) {
		return
	}
	switch m := m.(type) {
	case *Promise:
		if m.Epoch != t.cfg.Epoch || t.answers[from] != nil {
			return
		}
		if m.LogEpoch > m.Epoch || !chained(m.Base, m.Entries) {
			t.broken[from] = true
			return
		}
		if m.LogEpoch == t.cfg.Epoch {
			t.finish(Recovery{}, &DivergedError{Epoch: t.cfg.Epoch, Follower: from, Seq: m.Base.Seq, Why: "it holds a log of the takeover's own epoch: two owners claimed one epoch"})
			return
		}
		delete(t.broken, from)
		delete(t.unproven, from)
		t.answers[from] = m
		if len(t.answers) >= Need(len(t.cfg.Followers), t.cfg.Quorum) {
			t.finish(t.choose())
		}
	case *Refuse:
		switch {
		case m.Reason == RefuseStale && m.Newest > t.cfg.Epoch:
			t.finish(Recovery{}, &SupersededError{Epoch: t.cfg.Epoch, Newer: m.Newest, By: from})
		case m.Reason == RefuseUnproven && m.Epoch == t.cfg.Epoch && t.answers[from] == nil:
			// It found no claim of this epoch in the bucket: it will not
			// promise, and the takeover waits for the others.
			t.unproven[from] = true
		}
	}
}

// Tick lets time pass: fences are sent again, and the wait may run out.
func (t *Takeover) Tick(now time.Time) {
	if t.done {
		return
	}
	if waited := now.Sub(t.started); waited >= t.cfg.Wait {
		t.finish(Recovery{}, &TooFewAnswersError{Epoch: t.cfg.Epoch, Need: Need(len(t.cfg.Followers), t.cfg.Quorum),
			Answered: t.Answered(), Broken: slices.Sorted(maps.Keys(t.broken)),
			Unproven: slices.Sorted(maps.Keys(t.unproven)), Waited: waited})
		return
	}
	t.fence(now)
}

func (t *Takeover) fence(now time.Time) {
	for _, id := range t.cfg.Followers {
		if at, ok := t.asked[id]; t.answers[id] == nil && (!ok || now.Sub(at) >= t.cfg.Retransmit) {
			t.out = append(t.out, Envelope{To: id, Msg: &Fence{Epoch: t.cfg.Epoch, Actor: t.cfg.Actor}})
			t.asked[id] = now
		}
	}
}

func (t *Takeover) finish(r Recovery, err error) {
	t.done, t.recovery, t.err, t.out = true, r, err, nil
}

// choose picks the tail from the answers (the rule is under "Takeover" in
// the package documentation, doc.go): among the logs that reach past the
// bucket's durable point and hold it with the bucket's chain value, the one
// of the newest log epoch, and of those the longest.
func (t *Takeover) choose() (Recovery, error) {
	b := t.cfg.Bucket
	r := Recovery{Epoch: t.cfg.Epoch, Quorum: t.cfg.Quorum, Followers: t.cfg.Followers, Base: b}
	var best *Promise
	var bestID FollowerID
	for _, id := range t.Answered() {
		p := t.answers[id]
		end := endOf(p.Base, p.Entries)
		if end.Seq <= b.Seq {
			continue // all it holds, the bucket holds
		}
		if p.Base.Seq > b.Seq {
			return r, &DivergedError{Epoch: t.cfg.Epoch, Follower: id, Seq: p.Base.Seq,
				Why: fmt.Sprintf("its log starts past the bucket's durable point %d: it was told the bucket held more", b.Seq)}
		}
		if c, _ := chainAt(p.Base, p.Entries, b.Seq); c != b.Chain && !faults.ignoreBucketChain {
			// A branch the bucket superseded: written by an epoch older
			// than the one that wrote the bucket past where they part.
			continue
		}
		if best == nil {
			best, bestID = p, id
			continue
		}
		if p.LogEpoch == best.LogEpoch {
			// One epoch's owner writes one chain: of two logs it wrote,
			// the shorter is a prefix of the longer where they overlap.
			short, long, sid, lid := p, best, id, bestID
			if endOf(p.Base, p.Entries).Seq > endOf(best.Base, best.Entries).Seq {
				short, long, sid, lid = best, p, bestID, id
			}
			se := endOf(short.Base, short.Entries)
			if c, ok := chainAt(long.Base, long.Entries, se.Seq); ok && c != se.Chain {
				return r, &DivergedError{Epoch: t.cfg.Epoch, Follower: sid, Other: lid, Seq: se.Seq,
					Why: fmt.Sprintf("two logs of epoch %d disagree", p.LogEpoch)}
			}
		}
		if better(p, best) {
			best, bestID = p, id
		}
	}
	if best == nil {
		return r, nil
	}
	r.Tail = slices.Clip(best.Entries[b.Seq-best.Base.Seq:])
	r.From = bestID
	return r, nil
}

// better reports whether log p beats log best: a newer log epoch, or the
// same one and longer.
func better(p, best *Promise) bool {
	pe, be := endOf(p.Base, p.Entries).Seq, endOf(best.Base, best.Entries).Seq
	if faults.longestNotNewest {
		return pe > be
	}
	return p.LogEpoch > best.LogEpoch || (p.LogEpoch == best.LogEpoch && pe > be)
}
