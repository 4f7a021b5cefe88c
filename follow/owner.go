package follow

import (
	"fmt"
	"slices"
	"time"

	"github.com/framectl/framectl/frames"
)

// DefaultRetransmit is OwnerConfig.Retransmit and TakeoverConfig.Retransmit
// when zero.
const DefaultRetransmit = 200 * time.Millisecond

// OwnerConfig tunes an Owner.
type OwnerConfig struct {
	Limits Limits
	// Retransmit: what a follower has not acknowledged this long after it
	// was sent is sent again. Default DefaultRetransmit.
	Retransmit time.Duration
	// Actor is set on every reset (Append.Actor).
	Actor string
}

// Owner is the owner side of the protocol, without I/O: it takes the
// session's commits (Append), sends them to the followers of its set
// (Outbox), counts their acknowledgements (Receive) and says what is
// durable (Acked): the highest seq that q followers of the set hold, in
// this epoch, or that the bucket holds (BucketDurable), whichever is
// higher. Time passes only through Tick.
type Owner struct {
	epoch      frames.Epoch
	q          int
	lim        Limits
	retransmit time.Duration
	actor      string

	set   []FollowerID // the set own.json records
	next  []FollowerID // the set being changed to (ChangeSet), nil when none
	ready bool         // q of next hold everything acknowledged; own.json may record it
	peers map[FollowerID]*peer

	start frames.Seq // end of the recovered tail: every reset carries it
	base  Point      // the bucket's durable point
	log   []Entry    // chained from base
	bytes int64      // sizeOf(log)
	acked frames.Seq

	superseded *SupersededError
	now        time.Time
	out        []Envelope
}

// peer is what the owner knows of one follower in this epoch.
type peer struct {
	matched frames.Seq // the follower holds this epoch's log through here
	adopted bool       // it acknowledged this epoch's log at least once
	sent    frames.Seq // sent through here (not yet acknowledged past matched)
	reset   bool       // send a reset next
	// since is when the follower last made progress (matched moved) or
	// was last sent what it lacks from matched on: Retransmit after it,
	// with something still unacknowledged, that is sent again.
	since    time.Time
	answered Point // the end of the last NeedReset or Gap answered, so late copies are ignored
	failed   error
}

// NewOwner starts the owner of a recovered epoch: its log is the bucket's
// durable point and the tail the takeover recovered, and every follower of
// the set gets a reset carrying that tail before anything else.
func NewOwner(r Recovery, cfg OwnerConfig, now time.Time) (*Owner, error) {
	if err := checkSet(r.Epoch, r.Quorum, r.Followers); err != nil {
		return nil, err
	}
	if !chained(r.Base, r.Tail) {
		return nil, fmt.Errorf("%w: recovered tail not chained from seq %d", ErrInvalid, r.Base.Seq)
	}
	o := &Owner{
		epoch: r.Epoch, q: r.Quorum, lim: cfg.Limits, retransmit: cfg.Retransmit, actor: cfg.Actor,
		set: slices.Clone(r.Followers), peers: map[FollowerID]*peer{},
		base: r.Base, log: slices.Clip(r.Tail), bytes: sizeOf(r.Tail),
		start: endOf(r.Base, r.Tail).Seq, acked: r.Base.Seq, now: now,
	}
	if o.retransmit <= 0 {
		o.retransmit = DefaultRetransmit
	}
	for _, id := range o.set {
		o.peers[id] = &peer{reset: true}
	}
	o.flush(false)
	return o, nil
}

// Epoch is the owner's epoch.
func (o *Owner) Epoch() frames.Epoch { return o.epoch }

// Head is the end of the owner's log: the last commit appended.
func (o *Owner) Head() Point { return endOf(o.base, o.log) }

// Acked is the highest seq acknowledged: held by q followers of the set in
// this epoch (of both sets while one replaces another), or by the bucket.
// It never decreases, and stops moving once the owner is superseded.
func (o *Owner) Acked() frames.Seq { return o.acked }

// Durable is the bucket's durable point as last reported.
func (o *Owner) Durable() Point { return o.base }

// Superseded returns a *SupersededError once a follower said that a newer
// epoch fenced this one, nil before.
func (o *Owner) Superseded() error {
	if o.superseded == nil {
		return nil
	}
	return o.superseded
}

// Outbox returns the messages to send, and forgets them.
func (o *Owner) Outbox() []Envelope {
	out := o.out
	o.out = nil
	return out
}

// Append adds the next commit to the log and sends it. e must extend the
// head (Seq one more, Before the head's chain value). It fails with
// ErrBackpressure while the log past the bucket's durable point holds
// Limits.MaxTailBytes, and with the *SupersededError once superseded.
func (o *Owner) Append(e Entry) error {
	if o.superseded != nil {
		return o.superseded
	}
	head := o.Head()
	if !chained(head, []Entry{e}) {
		return fmt.Errorf("%w: entry %d (before %s) does not extend the head %d (%s)", ErrInvalid, e.Seq, e.Before, head.Seq, head.Chain)
	}
	if e.Size() > o.lim.tail() {
		return fmt.Errorf("%w: entry %d of %d bytes exceeds the tail bound of %d", ErrInvalid, e.Seq, e.Size(), o.lim.tail())
	}
	if o.bytes+e.Size() > o.lim.tail() {
		return ErrBackpressure
	}
	o.log = append(o.log, e)
	o.bytes += e.Size()
	o.flush(false)
	return nil
}

// BucketDurable reports that the bucket holds the log through p (a point of
// it): the owner drops what p covers, acknowledges through it, and tells
// the followers, which drop it too.
func (o *Owner) BucketDurable(p Point) error {
	if o.superseded != nil {
		return o.superseded
	}
	base, i, ok := trimAt(o.base, o.log, p)
	if !ok || p.Seq > o.Head().Seq {
		return fmt.Errorf("%w: durable point %d (%s) is not a point of the log", ErrInvalid, p.Seq, p.Chain)
	}
	if base == o.base {
		return nil
	}
	o.bytes -= sizeOf(o.log[:i])
	o.base, o.log = base, o.log[i:]
	o.advance()
	o.flush(true)
	return nil
}

// Receive takes a follower's reply.
func (o *Owner) Receive(from FollowerID, m Message) {
	if o.superseded != nil {
		return
	}
	p := o.peers[from]
	if p == nil {
		return
	}
	switch m := m.(type) {
	case *Ack:
		o.ack(p, m)
	case *Refuse:
		o.refused(from, p, m)
	}
	o.flush(false)
}

// Tick lets time pass: what was not acknowledged within Retransmit is sent
// again.
func (o *Owner) Tick(now time.Time) {
	if o.superseded != nil {
		return
	}
	o.now = now
	head := o.Head().Seq
	for _, id := range o.members() {
		p := o.peers[id]
		if p.failed != nil || now.Sub(p.since) < o.retransmit {
			continue
		}
		switch {
		case !p.adopted:
			p.reset = true
		case p.matched < head:
			p.sent, p.answered = p.matched, Point{}
		default:
			continue
		}
		p.since = now
	}
	o.flush(false)
}

func (o *Owner) ack(p *peer, m *Ack) {
	if m.Epoch != o.epoch || p.failed != nil {
		return
	}
	if c, ok := o.chainAt(m.End.Seq); m.End.Seq > o.Head().Seq || (ok && c != m.End.Chain) {
		p.failed = fmt.Errorf("%w: acknowledged seq %d (%s)", ErrFollowerBroken, m.End.Seq, m.End.Chain)
		return
	}
	if !p.adopted || m.End.Seq > p.matched {
		p.since = o.now
	}
	p.adopted = true
	p.matched = max(p.matched, m.End.Seq)
	p.sent = max(p.sent, p.matched)
	o.advance()
}

func (o *Owner) refused(from FollowerID, p *peer, m *Refuse) {
	if m.Newest > o.epoch {
		o.superseded = &SupersededError{Epoch: o.epoch, Newer: m.Newest, By: from}
		o.out = nil
		return
	}
	if m.Epoch != o.epoch || p.failed != nil {
		return
	}
	switch m.Reason {
	case RefuseNeedReset:
		// A copy of the same answer, or one from before the follower
		// took a reset, asks for nothing new.
		if !p.adopted && m.End != p.answered {
			p.reset, p.answered, p.since = true, m.End, o.now
		}
	case RefuseGap:
		if m.End.Seq >= p.matched && m.End.Seq < p.sent && m.End != p.answered {
			if c, ok := o.chainAt(m.End.Seq); ok && c != m.End.Chain {
				p.failed = fmt.Errorf("%w: holds seq %d as %s", ErrFollowerBroken, m.End.Seq, m.End.Chain)
				return
			}
			p.sent, p.answered, p.since = m.End.Seq, m.End, o.now
		}
	case RefuseFull:
		p.failed = ErrFollowerFull
	case RefuseBroken:
		p.failed = fmt.Errorf("%w: it refused a message as broken", ErrFollowerBroken)
	case RefuseUnproven:
		p.failed = fmt.Errorf("%w: it found no owner of epoch %d in the bucket", ErrFollowerBroken, o.epoch)
	}
}

// advance recomputes Acked.
func (o *Owner) advance() {
	acked := max(o.acked, o.base.Seq)
	old := o.quorumEnd(o.set)
	switch {
	case o.next == nil:
		acked = max(acked, old)
	case !o.ready:
		// The new followers are catching up: own.json still names the old
		// set, which alone counts. Once q of the new set hold everything
		// that may have been acknowledged, by this epoch or (the recovered
		// tail) by an older one, own.json may record it, and from then on
		// a commit counts only when both sets hold it.
		acked = max(acked, old)
		if o.quorumEnd(o.next) >= max(acked, o.start) || faults.noCatchUp {
			o.ready = true
		}
	default:
		acked = max(acked, min(old, o.quorumEnd(o.next)))
	}
	o.acked = acked
}

// quorumEnd is the highest seq q followers of set hold in this epoch.
func (o *Owner) quorumEnd(set []FollowerID) frames.Seq {
	q := o.q
	if faults.ackBelowQuorum && q > 1 {
		q--
	}
	if len(set) < q {
		return 0
	}
	ms := make([]frames.Seq, 0, len(set))
	for _, id := range set {
		ms = append(ms, o.peers[id].matched)
	}
	slices.Sort(ms)
	return ms[len(ms)-q]
}

// chainAt is the chain value at seq, if the log still holds that point.
func (o *Owner) chainAt(seq frames.Seq) (frames.Checksum, bool) {
	return chainAt(o.base, o.log, seq)
}

// members is everyone the owner sends to: the set, and those joining it.
func (o *Owner) members() []FollowerID {
	ms := o.set
	for _, id := range o.next {
		if !slices.Contains(o.set, id) {
			ms = append(slices.Clip(ms), id)
		}
	}
	return ms
}

// flush queues what each follower is due: a reset, what was appended since
// the last send, or (force) the new durable point alone.
func (o *Owner) flush(force bool) {
	head := o.Head()
	for _, id := range o.members() {
		p := o.peers[id]
		if p.failed != nil {
			continue
		}
		if !p.reset && p.sent < o.base.Seq {
			p.reset = true // what it lacks is in the bucket only
		}
		switch {
		case p.reset:
			es := o.log
			if faults.partialReset && len(es) > 1 {
				es = es[:len(es)/2]
			}
			o.send(id, p, &Append{Epoch: o.epoch, Reset: true, Prev: o.base, Durable: o.base, Entries: slices.Clip(es), Actor: o.actor})
			p.reset = false
		case !p.adopted:
			// Its reset is on the way (or lost: Tick sends another); an
			// Append before it would only be refused.
		case p.sent < head.Seq || force:
			prev, _ := o.chainAt(p.sent)
			o.send(id, p, &Append{Epoch: o.epoch, Prev: Point{p.sent, prev}, Durable: o.base, Entries: slices.Clip(o.log[p.sent-o.base.Seq:])})
		}
	}
}

func (o *Owner) send(id FollowerID, p *peer, m *Append) {
	o.out = append(o.out, Envelope{To: id, Msg: m})
	p.sent = max(p.sent, endOf(m.Prev, m.Entries).Seq)
	if m.Reset {
		p.sent, p.since = endOf(m.Prev, m.Entries).Seq, o.now
	}
}

// FollowerStatus is what the owner knows of one follower.
type FollowerStatus struct {
	ID      FollowerID
	Matched frames.Seq // holds this epoch's log through here
	Member  bool       // in the set own.json records (false: joining)
	Failed  error      // why the owner stopped sending to it (ErrFollowerFull, ErrFollowerBroken), nil if it did not
}

// Followers returns the status of every follower the owner sends to, in
// set order, those joining last.
func (o *Owner) Followers() []FollowerStatus {
	var st []FollowerStatus
	for _, id := range o.members() {
		p := o.peers[id]
		st = append(st, FollowerStatus{ID: id, Matched: p.matched, Member: slices.Contains(o.set, id), Failed: p.failed})
	}
	return st
}

// ChangeSet starts replacing the set with next, of the same size: the
// followers of next not in the set (new stores, holding nothing of this
// epoch) get a reset carrying everything past the bucket's durable point,
// then every commit. They count toward q only once q followers of next hold
// everything acknowledged (Pending reports ready), own.json recorded next
// and Recorded said so. Until ready acknowledgement goes on by the set own.json
// records; from ready on a commit counts only once q of each set hold it,
// since own.json may name either until Recorded.
func (o *Owner) ChangeSet(next []FollowerID) error {
	switch {
	case o.superseded != nil:
		return o.superseded
	case o.next != nil:
		return fmt.Errorf("%w: a change of the set is already under way", ErrInvalid)
	case len(next) != len(o.set):
		return fmt.Errorf("%w: a set of %d followers for one of %d", ErrInvalid, len(next), len(o.set))
	}
	if err := checkSet(o.epoch, o.q, next); err != nil {
		return err
	}
	o.next = slices.Clone(next)
	for _, id := range o.next {
		if o.peers[id] == nil {
			o.peers[id] = &peer{reset: true}
		}
	}
	o.advance()
	o.flush(false)
	return nil
}

// Cancel gives up a change of the set before it is ready (a joining
// follower failed, say). Once it is ready own.json may already record the
// new set, so it can only be finished (Recorded), and a failed follower
// replaced in turn.
func (o *Owner) Cancel() error {
	if o.next == nil || o.ready {
		return fmt.Errorf("%w: no change of the set to cancel before it is ready", ErrInvalid)
	}
	for _, id := range o.next {
		if !slices.Contains(o.set, id) {
			delete(o.peers, id)
		}
	}
	o.next = nil
	return nil
}

// Pending returns the set being changed to, and whether it is ready to be
// recorded in own.json: q of it hold everything acknowledged. nil, false
// when no change is under way.
func (o *Owner) Pending() ([]FollowerID, bool) {
	if o.next == nil {
		return nil, false
	}
	return slices.Clone(o.next), o.ready
}

// Recorded says that own.json now records the pending set, with this epoch
// (a conditional write that a takeover would have made fail): the new set
// alone counts from now on.
func (o *Owner) Recorded(set []FollowerID) error {
	if o.next == nil || !o.ready || !slices.Equal(set, o.next) {
		return fmt.Errorf("%w: set %v is not the ready pending set", ErrInvalid, set)
	}
	for _, id := range o.set {
		if !slices.Contains(o.next, id) {
			delete(o.peers, id)
		}
	}
	o.set, o.next, o.ready = o.next, nil, false
	o.advance()
	return nil
}

// checkSet checks an epoch, quorum and follower set.
func checkSet(epoch frames.Epoch, q int, set []FollowerID) error {
	switch {
	case epoch == 0:
		return fmt.Errorf("%w: epoch 0", ErrInvalid)
	case len(set) == 0 || q < 1 || q > len(set):
		return fmt.Errorf("%w: quorum %d of %d followers", ErrInvalid, q, len(set))
	}
	for i, id := range set {
		if id == "" || slices.Contains(set[:i], id) {
			return fmt.Errorf("%w: follower %q empty or repeated", ErrInvalid, id)
		}
	}
	return nil
}
