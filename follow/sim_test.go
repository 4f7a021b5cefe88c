package follow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/race"
)

// The simulation runs an owner and n followers through random schedules,
// one seeded random choice at a time, with every fault the protocol must
// survive: messages dropped, delayed, duplicated and reordered (delivery
// picks any message in flight), pairs of nodes partitioned, followers
// crashed and restarted (their store kept), followers' stores lost (at
// most q-1 of the set at a time: the rule under "What an acknowledged
// commit survives"), small disks that fill, owners crashed, takeovers
// started while the old owner runs on as a zombie that keeps committing,
// replacements of lost or failed followers, messages corrupted past the
// transport's checks. Every message crosses the wire encoding. Each seed
// draws its own mix of these (swarm: a fault absent, rare or frequent),
// and half the time a lost store is the one whose log reaches furthest.
// Each configuration runs again with the owners sending through
// GroupCommit, as package quorum's do: one Append in flight per follower,
// the rest merged behind it.
//
// After every step it checks:
//   - a follower holds only chained entries, never more than its bound, and
//     its promise never goes back;
//   - an owner's Acked never goes back, and no two commits are ever
//     acknowledged at one seq;
//   - once a newer epoch's fence reached n-q+1 followers of an owner's set,
//     that owner never acknowledges past what those followers held of its
//     log when they promised (sealed), nor past what it had acknowledged;
//   - the bucket is one chain from seq 1;
//
// and at every completed takeover, that the recovered state (the bucket
// through its durable point, then the tail) holds every acknowledged seq,
// with the commit acknowledged there, in order, each commit once.
//
// A run ends by healing everything and requiring progress: an owner of the
// newest epoch acknowledges a new commit by quorum within a bound on
// steps (the followers that missed frames catch up; the lost and full are
// replaced), and a last takeover recovers everything.
//
// FOLLOW_SIM_SEEDS=n runs n seeds per configuration (default 2000);
// FOLLOW_SIM_SEED=s replays one seed with its whole trace.

const simSteps = 400

// simConfig is a follower set's size and quorum, and whether its owners
// send through GroupCommit. The ones without come first: they are the
// schedules TestSimulationCatchesFaults was tuned on.
type simConfig struct {
	n, q        int
	groupCommit bool
}

func (c simConfig) String() string {
	s := fmt.Sprintf("n=%d,q=%d", c.n, c.q)
	if c.groupCommit {
		s += ",group_commit"
	}
	return s
}

var simConfigs = []simConfig{{3, 2, false}, {5, 3, false}, {3, 2, true}, {5, 3, true}}

func TestSimulation(t *testing.T) {
	seeds, one := simSeeds(t)
	for _, c := range simConfigs {
		t.Run(c.String(), func(t *testing.T) {
			var total simStats
			for _, seed := range seedList(seeds, one) {
				w := newWorld(seed, c, one >= 0)
				err := w.run(simSteps)
				if one >= 0 {
					t.Log(strings.Join(w.trace, "\n"))
				}
				if err != nil {
					t.Fatalf("%v\nreplay: FOLLOW_SIM_SEED=%d go test ./follow -run 'TestSimulation/%s$' -v", err, seed, c)
				}
				total.add(w.stats)
			}
			t.Logf("%d seeds: %s", len(seedList(seeds, one)), total)
			if seeds >= 200 && one < 0 {
				total.exercised(t, c)
			}
		})
	}
}

func simSeeds(t *testing.T) (int, int64) {
	seeds, one := 2000, int64(-1)
	if s := os.Getenv("FOLLOW_SIM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FOLLOW_SIM_SEEDS=%q: want a positive count", s)
		}
		seeds = n
	}
	if s := os.Getenv("FOLLOW_SIM_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			t.Fatalf("FOLLOW_SIM_SEED=%q: want a seed", s)
		}
		one = n
	}
	if race.Enabled && os.Getenv("FOLLOW_SIM_SEEDS") == "" {
		// The race detector slows the simulation about tenfold.
		seeds /= 5
	}
	return seeds, one
}

func seedList(seeds int, one int64) []int64 {
	if one >= 0 {
		return []int64{one}
	}
	l := make([]int64, seeds)
	for i := range l {
		l[i] = int64(i)
	}
	return l
}

// simStats counts what the schedules did, so a change that stops them
// from exercising something shows.
type simStats struct {
	commits, acked, takeovers, recovered, tooFew, superseded, zombieRefused int
	lost, replaced, full, corrupted, dropped, duplicated, resets            int
	held                                                                    int // Appends GroupCommit held back (merged, replaced or dropped)
}

func (s *simStats) add(o simStats) {
	s.commits += o.commits
	s.acked += o.acked
	s.takeovers += o.takeovers
	s.recovered += o.recovered
	s.tooFew += o.tooFew
	s.superseded += o.superseded
	s.zombieRefused += o.zombieRefused
	s.lost += o.lost
	s.replaced += o.replaced
	s.full += o.full
	s.corrupted += o.corrupted
	s.dropped += o.dropped
	s.duplicated += o.duplicated
	s.resets += o.resets
	s.held += o.held
}

// exercised fails if some fault never happened, or some outcome never came
// of the schedules: a simulation that stopped reaching it checks nothing
// about it.
func (s simStats) exercised(t *testing.T, c simConfig) {
	if c.groupCommit && s.held == 0 {
		t.Errorf("no Append held by GroupCommit in any schedule")
	}
	for name, n := range map[string]int{
		"acknowledgement": s.acked, "takeover that recovered a tail": s.recovered, "takeover with too few answers": s.tooFew,
		"superseded takeover": s.superseded, "refusal to a zombie": s.zombieRefused, "lost store": s.lost,
		"replacement": s.replaced, "full refusal": s.full, "corrupted delivery": s.corrupted, "drop": s.dropped,
		"duplicate": s.duplicated, "reset": s.resets,
	} {
		if n == 0 {
			t.Errorf("no %s in any schedule", name)
		}
	}
}

func (s simStats) String() string {
	return fmt.Sprintf("commits %d, acknowledged %d, takeovers %d (recovered a tail %d, too few answers %d, superseded %d), "+
		"refusals to zombies %d, stores lost %d, replacements %d, full refusals %d, corrupted deliveries %d, drops %d, duplicates %d, resets %d, "+
		"Appends held by GroupCommit %d",
		s.commits, s.acked, s.takeovers, s.recovered, s.tooFew, s.superseded, s.zombieRefused, s.lost, s.replaced, s.full, s.corrupted, s.dropped, s.duplicated, s.resets,
		s.held)
}

// simNode is a follower and its store.
type simNode struct {
	id       FollowerID
	f        *Follower
	lim      Limits
	slow     bool // messages to and from it wait five times longer, on average
	down     bool // crashed: takes nothing until restarted, from its store
	lost     bool // its store is gone: never again
	promised frames.Epoch
}

// simOwner is an owner (or, before, its takeover) and the history its log
// stands for, from seq 1.
type simOwner struct {
	epoch   frames.Epoch
	o       *Owner
	gc      *GroupCommit // nil: the owner's Appends go as it queues them
	t       *Takeover
	hist    []Entry
	set     []FollowerID
	acked   frames.Seq
	bounded bool
	bound   frames.Seq
	err     error // why its takeover failed
}

func (s *simOwner) addr() FollowerID { return FollowerID("o" + s.epoch.String()) }

// forget drops GroupCommit's windows of the followers of gone not in kept,
// whom the owner no longer sends to.
func (s *simOwner) forget(gone, kept []FollowerID) {
	for _, id := range gone {
		if s.gc != nil && !slices.Contains(kept, id) {
			s.gc.Forget(id)
		}
	}
}

type simMsg struct {
	from, to FollowerID
	data     []byte
}

type simAck struct {
	id    uint64
	epoch frames.Epoch // the oldest epoch that acknowledged it
}

type world struct {
	seed   int64
	rng    *rand.Rand
	n, q   int
	lim    Limits
	now    time.Time
	nodes  map[FollowerID]*simNode
	order  []FollowerID
	owners []*simOwner // every owner and takeover not crashed, oldest first
	net    []simMsg
	cut    map[[2]FollowerID]bool
	bucket []Entry
	own    struct {
		epoch frames.Epoch
		set   []FollowerID
	}
	acked map[frames.Seq]simAck // seq -> the commit acknowledged there
	// recovered is the history each completed takeover recovered, by
	// epoch: it must hold every commit an older epoch acknowledges, then or
	// later.
	recovered map[frames.Epoch][]Entry
	sealed    map[FollowerID]map[frames.Epoch]frames.Seq
	commits   uint64
	step      int
	stats     simStats
	weights   [evKinds]int
	total     int
	slow      bool // some followers are slow
	// isolateNew: a new takeover starts cut from up to q-1 followers,
	// which go on with the old owner as long as the cut lasts.
	isolateNew  bool
	groupCommit bool // owners send through GroupCommit
	settling    bool // faults are over
	full        bool // keep the whole trace
	trace       []string
	err         error
}

func newWorld(seed int64, c simConfig, fullTrace bool) *world {
	n, q := c.n, c.q
	w := &world{
		seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x666f6c6c6f77)), n: n, q: q,
		lim: Limits{MaxTailBytes: 2400}, now: time.Unix(1_700_000_000, 0),
		nodes: map[FollowerID]*simNode{}, cut: map[[2]FollowerID]bool{}, acked: map[frames.Seq]simAck{}, recovered: map[frames.Epoch][]Entry{},
		sealed: map[FollowerID]map[frames.Epoch]frames.Seq{}, full: fullTrace, groupCommit: c.groupCommit,
	}
	w.swarm()
	for range n {
		w.own.set = append(w.own.set, w.newNode().id)
	}
	return w
}

func (w *world) newNode() *simNode {
	lim := w.lim
	if w.rng.IntN(10) == 0 {
		lim.MaxTailBytes /= 4 // a small disk: it fills, refuses, is replaced
	}
	id := FollowerID("f" + strconv.Itoa(len(w.order)))
	nd := &simNode{id: id, f: NewFollower(lim), lim: lim, slow: w.slow && w.rng.IntN(3) == 0}
	w.nodes[id] = nd
	w.order = append(w.order, id)
	return nd
}

func (w *world) logf(format string, args ...any) {
	line := fmt.Sprintf("%5d %8.3fs ", w.step, float64(w.now.UnixMilli()%1_000_000)/1000) + fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	if !w.full && len(w.trace) > 200 {
		w.trace = w.trace[len(w.trace)-150:]
	}
}

func (w *world) failf(format string, args ...any) {
	if w.err == nil {
		gc := ""
		if w.groupCommit {
			gc = ", group commit"
		}
		w.err = fmt.Errorf("seed %d (n=%d q=%d%s) step %d: %s\nlast events:\n%s", w.seed, w.n, w.q, gc, w.step, fmt.Sprintf(format, args...), strings.Join(w.trace, "\n"))
	}
}

func (w *world) run(steps int) error {
	w.takeover()
	for w.step = 1; w.step <= steps && w.err == nil; w.step++ {
		w.act()
		w.check()
	}
	if w.err == nil {
		w.settle()
	}
	return w.err
}

// current is the owner (or takeover) of the newest epoch, nil if it crashed
// or failed.
func (w *world) current() *simOwner {
	for _, s := range w.owners {
		if s.epoch == w.own.epoch {
			return s
		}
	}
	return nil
}

func (w *world) pick(n int) int { return w.rng.IntN(n) }

// The kinds of step, and their weights before swarm (per thousand).
const (
	evCommit = iota
	evDeliver
	evDrop
	evTick
	evUpload
	evPartition
	evHeal
	evCrashFollower
	evLoseFollower
	evCrashOwner
	evTakeover
	evReplace
	evCorrupt
	evDuplicate
	evIsolate
	evKinds
)

var baseWeights = [evKinds]int{
	evCommit: 230, evDeliver: 370, evDrop: 30, evTick: 120, evUpload: 60, evPartition: 30, evHeal: 10,
	evCrashFollower: 30, evLoseFollower: 7, evCrashOwner: 6, evTakeover: 6, evReplace: 20, evCorrupt: 5, evDuplicate: 15,
	evIsolate: 10,
}

// swarm gives each seed its own mix of faults (swarm testing): every kind
// of fault is, for one seed, absent, rare or frequent, so schedules reach
// corners that one fixed mix makes improbable (long partitions with no
// heal, many takeovers and no uploads, ...). Commits, deliveries and time
// always happen.
func (w *world) swarm() {
	factors := []int{0, 1, 1, 2, 4}
	for k := range evKinds {
		w.weights[k] = baseWeights[k]
		if k != evCommit && k != evDeliver && k != evTick {
			w.weights[k] *= factors[w.pick(len(factors))]
		}
	}
	for _, wt := range w.weights {
		w.total += wt
	}
	w.slow = w.pick(2) == 0
	w.isolateNew = w.pick(2) == 0
}

// isolate cuts s from up to most followers, chosen at random.
func (w *world) isolate(s *simOwner, most int) {
	k := w.pick(most + 1)
	var cut []FollowerID
	for _, i := range w.rng.Perm(len(w.order))[:min(k, len(w.order))] {
		w.cut[pair(s.addr(), w.order[i])] = true
		cut = append(cut, w.order[i])
	}
	w.logf("isolate %s from %v", s.addr(), cut)
}

// act takes one random step.
func (w *world) act() {
	cur := w.current()
	if cur == nil && w.pick(20) == 0 {
		w.takeover() // an actor with no owner gets one, sooner or later
		return
	}
	if cur != nil && cur.o != nil && w.pick(4) == 0 {
		if _, ready := cur.o.Pending(); ready {
			w.replace(cur) // an owner records a ready set at once
			return
		}
	}
	r, ev := w.pick(w.total), 0
	for ; r >= w.weights[ev]; ev++ {
		r -= w.weights[ev]
	}
	switch ev {
	case evCommit:
		if len(w.owners) > 0 {
			w.commit(w.owners[w.pick(len(w.owners))])
		}
	case evDeliver:
		w.deliver(false)
	case evDrop:
		if len(w.net) > 0 {
			i := w.pick(len(w.net))
			w.logf("drop %s -> %s", w.net[i].from, w.net[i].to)
			w.net = slices.Delete(w.net, i, i+1)
			w.stats.dropped++
		}
	case evTick:
		w.tick(time.Duration(w.pick(60)) * time.Millisecond)
	case evUpload:
		w.upload()
	case evPartition:
		w.partition()
	case evHeal:
		if len(w.cut) > 0 {
			w.logf("heal all partitions")
			clear(w.cut)
		}
	case evCrashFollower:
		w.crashOrRestart()
	case evLoseFollower:
		w.lose()
	case evCrashOwner:
		if len(w.owners) > 0 {
			i := w.pick(len(w.owners))
			w.logf("crash owner %s", w.owners[i].addr())
			w.owners = slices.Delete(w.owners, i, i+1)
		}
	case evTakeover:
		w.takeover()
	case evReplace:
		w.replace(cur)
	case evCorrupt:
		w.corrupt()
	case evDuplicate:
		w.deliver(true)
	case evIsolate:
		if len(w.owners) > 0 {
			w.isolate(w.owners[w.pick(len(w.owners))], len(w.order))
		}
	}
}

func (w *world) commit(s *simOwner) {
	if s.o == nil {
		return
	}
	head := s.o.Head()
	w.commits++
	body := binary.BigEndian.AppendUint64(nil, w.commits)
	body = append(body, make([]byte, w.pick(48))...)
	e := Entry{Seq: head.Seq + 1, Before: head.Chain, After: frames.Checksum(w.rng.Uint64()), Body: body}
	switch err := s.o.Append(e); {
	case err == nil:
		s.hist = append(s.hist, e)
		w.stats.commits++
		w.logf("%s commits seq %d (commit %d)", s.addr(), e.Seq, w.commits)
		w.flush(s)
	case errors.Is(err, ErrBackpressure), errors.Is(err, ErrSuperseded):
	default:
		w.failf("%s: Append: %v", s.addr(), err)
	}
}

func commitID(e *Entry) uint64 { return binary.BigEndian.Uint64(e.Body) }

// send encodes m onto the network.
func (w *world) send(from, to FollowerID, m Message) {
	lim := w.lim
	if nd := w.nodes[from]; nd != nil {
		lim = nd.lim
	}
	data, err := AppendMessage(nil, m, lim)
	if err != nil {
		w.failf("%s -> %s: encoding %T: %v", from, to, m, err)
		return
	}
	w.net = append(w.net, simMsg{from: from, to: to, data: data})
}

func (w *world) flush(s *simOwner) {
	var out []Envelope
	switch {
	case s.t != nil:
		out = s.t.Outbox()
	case s.gc != nil:
		out = s.o.Outbox()
		n := len(out)
		out = s.gc.Route(out, w.now)
		w.stats.held += n - len(out)
	default:
		out = s.o.Outbox()
	}
	w.sendAll(s, out)
}

func (w *world) sendAll(s *simOwner, out []Envelope) {
	for _, env := range out {
		w.send(s.addr(), env.To, env.Msg)
	}
}

func pair(a, b FollowerID) [2]FollowerID {
	if a > b {
		a, b = b, a
	}
	return [2]FollowerID{a, b}
}

// deliver delivers a random message in flight (any of them: arbitrary
// delay and reorder), a copy left behind if dup.
func (w *world) deliver(dup bool) {
	if len(w.net) == 0 {
		return
	}
	i := w.pick(len(w.net))
	msg := w.net[i]
	if nd, nf := w.nodes[msg.to], w.nodes[msg.from]; ((nd != nil && nd.slow) || (nf != nil && nf.slow)) && w.pick(5) != 0 {
		return
	}
	if dup {
		w.stats.duplicated++
	} else {
		w.net = slices.Delete(w.net, i, i+1)
	}
	m, err := DecodeMessage(msg.data, string(msg.from), w.lim)
	if err != nil {
		w.failf("%s -> %s: decoding: %v", msg.from, msg.to, err)
		return
	}
	w.handle(msg.from, msg.to, m)
}

func (w *world) handle(from, to FollowerID, m Message) {
	if w.cut[pair(from, to)] {
		w.logf("cut %s -> %s %s", from, to, describe(m))
		return
	}
	if nd := w.nodes[to]; nd != nil {
		if nd.down || nd.lost {
			return
		}
		before := nd.f.State()
		reply := nd.f.Handle(m)
		after := nd.f.State()
		w.logf("%s -> %s %s => %s", from, to, describe(m), describe(reply))
		if after.Promised > before.LogEpoch && before.LogEpoch != 0 {
			// From now on it refuses before.LogEpoch's owner: what it
			// holds of that log is sealed.
			if w.sealed[to] == nil {
				w.sealed[to] = map[frames.Epoch]frames.Seq{}
			}
			if _, ok := w.sealed[to][before.LogEpoch]; !ok {
				w.sealed[to][before.LogEpoch] = before.End().Seq
			}
		}
		if rf, ok := reply.(*Refuse); ok {
			switch rf.Reason {
			case RefuseStale:
				w.stats.zombieRefused++
			case RefuseFull:
				w.stats.full++
			}
		}
		if a, ok := m.(*Append); ok && a.Reset {
			w.stats.resets++
		}
		if reply != nil {
			w.send(to, from, reply)
		}
		return
	}
	for _, s := range w.owners {
		if s.addr() != to {
			continue
		}
		w.logf("%s -> %s %s", from, to, describe(m))
		if s.t != nil {
			s.t.Receive(from, m)
			w.flush(s)
			w.takeoverDone(s)
		} else {
			if s.gc != nil {
				w.sendAll(s, s.gc.Receive(from, m, w.now)) // what was held goes first
			}
			s.o.Receive(from, m)
			w.flush(s)
		}
		return
	}
}

func (w *world) tick(d time.Duration) {
	w.now = w.now.Add(d)
	for _, s := range slices.Clone(w.owners) {
		if s.t != nil {
			s.t.Tick(w.now)
			w.flush(s)
			w.takeoverDone(s)
		} else {
			if s.gc != nil {
				w.sendAll(s, s.gc.Tick(w.now))
			}
			s.o.Tick(w.now)
			w.flush(s)
		}
	}
}

// upload writes part of the newest epoch's log to the bucket. The bucket
// takes writes of own.json's epoch only: that is what the lease guard and
// restore's lineage give (a superseded owner's objects are never part of a
// restore).
func (w *world) upload() {
	s := w.current()
	if s == nil || s.o == nil {
		return
	}
	k := frames.Seq(len(w.bucket))
	head := s.o.Head().Seq
	if head <= k {
		return
	}
	if k > 0 && s.hist[k-1].After != w.bucket[k-1].After {
		w.failf("%s's log does not extend the bucket at seq %d", s.addr(), k)
		return
	}
	m := k + 1 + frames.Seq(w.pick(int(head-k)))
	w.bucket = append(w.bucket, s.hist[k:m]...)
	w.logf("%s uploads %d..%d", s.addr(), k+1, m)
	if err := s.o.BucketDurable(s.hist[m-1].Point()); err != nil {
		w.failf("%s: BucketDurable(%d): %v", s.addr(), m, err)
	}
	w.flush(s)
}

func (w *world) bucketPoint() Point {
	if len(w.bucket) == 0 {
		return Point{}
	}
	return w.bucket[len(w.bucket)-1].Point()
}

func (w *world) partition() {
	if len(w.owners) == 0 {
		return
	}
	a := w.owners[w.pick(len(w.owners))].addr()
	b := w.order[w.pick(len(w.order))]
	k := pair(a, b)
	w.cut[k] = !w.cut[k]
	if !w.cut[k] {
		delete(w.cut, k)
	}
	w.logf("partition %s | %s: %v", a, b, w.cut[k])
}

func (w *world) crashOrRestart() {
	nd := w.nodes[w.order[w.pick(len(w.order))]]
	switch {
	case nd.lost:
	case nd.down:
		// It comes back from its store: what it last persisted.
		f, err := OpenFollower(nd.f.State(), nd.lim)
		if err != nil {
			w.failf("%s restarts from a store it cannot open: %v", nd.id, err)
			return
		}
		nd.f, nd.down = f, false
		w.logf("restart %s", nd.id)
	default:
		nd.down = true
		w.logf("crash %s", nd.id)
	}
}

// lostIn counts the followers of set whose store is lost.
func (w *world) lostIn(set []FollowerID) int {
	n := 0
	for _, id := range set {
		if w.nodes[id].lost {
			n++
		}
	}
	return n
}

// lose loses a follower's store, within the rule: at most q-1 of the set
// (and of the set being changed to).
//
// Half the time it loses the most worth losing: the follower of the set
// whose log reaches furthest, the one most likely to be among the few
// that hold the newest acknowledged commits.
func (w *world) lose() {
	nd := w.nodes[w.order[w.pick(len(w.order))]]
	if w.pick(2) == 0 {
		var best frames.Seq
		for _, id := range w.own.set {
			if c := w.nodes[id]; !c.lost {
				if st := c.f.State(); st.End().Seq >= best {
					nd, best = c, st.End().Seq
				}
			}
		}
	}
	if nd.lost {
		return
	}
	sets := [][]FollowerID{w.own.set}
	for _, s := range w.owners {
		if s.o != nil {
			sets = append(sets, s.set)
			if next, _ := s.o.Pending(); next != nil {
				sets = append(sets, next)
			}
		}
	}
	for _, set := range sets {
		if slices.Contains(set, nd.id) && w.lostIn(set) >= w.q-1 {
			return
		}
	}
	nd.lost = true
	w.stats.lost++
	w.logf("lose %s's store", nd.id)
}

// takeover claims the next epoch (own.json's epoch goes up, as a claim
// does) and starts fencing; the bucket's durable point is read after the
// claim.
func (w *world) takeover() {
	w.own.epoch++
	s := &simOwner{epoch: w.own.epoch, set: slices.Clone(w.own.set)}
	t, err := NewTakeover(TakeoverConfig{Epoch: s.epoch, Quorum: w.q, Followers: s.set, Bucket: w.bucketPoint(),
		Wait: 400 * time.Millisecond, Retransmit: 100 * time.Millisecond}, w.now)
	if err != nil {
		w.failf("NewTakeover: %v", err)
		return
	}
	s.t = t
	w.owners = append(w.owners, s)
	if w.isolateNew && !w.settling {
		w.isolate(s, w.q-1)
	}
	w.stats.takeovers++
	w.logf("%s claims epoch %d, set %v, bucket at %d", s.addr(), s.epoch, s.set, len(w.bucket))
	w.flush(s)
}

func (w *world) takeoverDone(s *simOwner) {
	r, err, done := s.t.Done()
	if !done {
		return
	}
	w.logf("%s takeover done: tail %d..%d from %q, %v", s.addr(), r.Base.Seq, endOf(r.Base, r.Tail).Seq, r.From, err)
	switch {
	case err == nil:
	case errors.Is(err, ErrTooFewAnswers):
		w.stats.tooFew++
		w.remove(s)
		s.err = err
		return
	case errors.Is(err, ErrSuperseded):
		w.stats.superseded++
		w.remove(s)
		s.err = err
		return
	default:
		w.failf("%s: takeover: %v", s.addr(), err)
		return
	}
	if len(r.Tail) > 0 {
		w.stats.recovered++
	}
	// The recovered state: the bucket through the point read, then the
	// tail.
	if int(r.Base.Seq) > len(w.bucket) {
		w.failf("%s recovered from bucket point %d; the bucket holds %d", s.addr(), r.Base.Seq, len(w.bucket))
		return
	}
	hist := append(slices.Clone(w.bucket[:r.Base.Seq]), r.Tail...)
	w.checkRecovered(s.epoch, hist)
	w.recovered[s.epoch] = hist
	o, err := NewOwner(r, OwnerConfig{Limits: w.lim, Retransmit: 100 * time.Millisecond}, w.now)
	if err != nil {
		w.failf("%s: NewOwner: %v", s.addr(), err)
		return
	}
	s.o, s.t, s.hist, s.acked = o, nil, hist, o.Acked()
	if w.groupCommit {
		s.gc = NewGroupCommit(100 * time.Millisecond)
	}
	w.flush(s)
}

func (w *world) remove(s *simOwner) {
	if i := slices.Index(w.owners, s); i >= 0 {
		w.owners = slices.Delete(w.owners, i, i+1)
	}
}

// checkRecovered: every seq an older epoch acknowledged is in the history
// epoch recovered, with the commit acknowledged there, in order, once;
// hist is one chain from seq 1.
func (w *world) checkRecovered(epoch frames.Epoch, hist []Entry) {
	who := (&simOwner{epoch: epoch}).addr()
	if !chained(Point{}, hist) {
		w.failf("%s recovered a history that is not one chain from seq 1", who)
		return
	}
	seen := map[uint64]frames.Seq{}
	for i := range hist {
		id := commitID(&hist[i])
		if at, ok := seen[id]; ok {
			w.failf("%s recovered commit %d twice, at seq %d and %d", who, id, at, hist[i].Seq)
			return
		}
		seen[id] = hist[i].Seq
	}
	for seq, a := range w.acked {
		if a.epoch < epoch {
			w.checkHolds(epoch, hist, seq, a)
		}
	}
}

func (w *world) checkHolds(epoch frames.Epoch, hist []Entry, seq frames.Seq, a simAck) {
	who := (&simOwner{epoch: epoch}).addr()
	if int(seq) > len(hist) {
		w.failf("%s recovered through seq %d; epoch %d acknowledged seq %d (commit %d)", who, len(hist), a.epoch, seq, a.id)
		return
	}
	if got := commitID(&hist[seq-1]); got != a.id {
		w.failf("%s recovered commit %d at seq %d; epoch %d acknowledged commit %d there", who, got, seq, a.epoch, a.id)
	}
}

// replace replaces the lost and failed followers of the newest epoch's
// set, or records a change that is ready (own.json, with If-Match on the
// epoch: it fails once a newer epoch claimed).
func (w *world) replace(s *simOwner) {
	if s == nil || s.o == nil {
		return
	}
	sts := s.o.Followers()
	if next, ready := s.o.Pending(); next != nil {
		for _, st := range sts {
			if !ready && slices.Contains(next, st.ID) && (st.Failed != nil || w.nodes[st.ID].lost) {
				if err := s.o.Cancel(); err != nil {
					w.failf("%s: Cancel: %v", s.addr(), err)
				}
				s.forget(next, s.set)
				w.logf("%s cancels the change to %v: %s failed (%v)", s.addr(), next, st.ID, st.Failed)
				return
			}
		}
		if ready && w.own.epoch == s.epoch && slices.Equal(w.own.set, s.set) {
			if err := s.o.Recorded(next); err != nil {
				w.failf("%s: Recorded: %v", s.addr(), err)
				return
			}
			s.forget(s.set, next)
			w.own.set, s.set = next, next
			w.stats.replaced++
			w.logf("%s records set %v", s.addr(), next)
		}
		return
	}
	next := slices.Clone(s.set)
	for i, st := range sts {
		if w.nodes[st.ID].lost || st.Failed != nil {
			next[i] = w.newNode().id
		}
	}
	if slices.Equal(next, s.set) {
		return
	}
	if err := s.o.ChangeSet(next); err != nil {
		w.failf("%s: ChangeSet(%v): %v", s.addr(), next, err)
		return
	}
	w.logf("%s changes set %v to %v", s.addr(), s.set, next)
	w.flush(s)
}

// corrupt delivers a copy of an Append in flight with its chain broken, as
// a sender with a bug would, past the wire's checks.
func (w *world) corrupt() {
	for _, i := range w.rng.Perm(len(w.net)) {
		msg := w.net[i]
		m, err := DecodeMessage(msg.data, string(msg.from), w.lim)
		if a, ok := m.(*Append); err == nil && ok && len(a.Entries) > 1 {
			a.Entries[1].Before ^= 1
			w.stats.corrupted++
			w.logf("corrupt a copy of %s -> %s", msg.from, msg.to)
			w.handle(msg.from, msg.to, a)
			return
		}
	}
}

// check checks the invariants that hold after every step.
func (w *world) check() {
	if w.err != nil {
		return
	}
	for _, id := range w.order {
		nd := w.nodes[id]
		if nd.lost {
			continue
		}
		st := nd.f.State()
		switch {
		case !chained(st.Base, st.Entries):
			w.failf("follower %s holds entries not chained from seq %d", id, st.Base.Seq)
		case st.LogEpoch > st.Promised:
			w.failf("follower %s holds a log of epoch %d past its promise %d", id, st.LogEpoch, st.Promised)
		case st.Promised < nd.promised:
			w.failf("follower %s's promise went back from %d to %d", id, nd.promised, st.Promised)
		case nd.f.Bytes() > nd.lim.tail():
			w.failf("follower %s holds %d bytes, past its bound of %d", id, nd.f.Bytes(), nd.lim.tail())
		}
		nd.promised = st.Promised
	}
	if !chained(Point{}, w.bucket) {
		w.failf("the bucket is not one chain from seq 1")
	}
	for _, s := range w.owners {
		if s.o == nil {
			continue
		}
		a := s.o.Acked()
		if a < s.acked {
			w.failf("%s's Acked went back from %d to %d", s.addr(), s.acked, a)
			return
		}
		for seq := s.acked + 1; seq <= a; seq++ {
			id := commitID(&s.hist[seq-1])
			was, ok := w.acked[seq]
			if ok && was.id != id {
				w.failf("%s acknowledged commit %d at seq %d; epoch %d acknowledged commit %d there", s.addr(), id, seq, was.epoch, was.id)
				return
			}
			if !ok || s.epoch < was.epoch {
				w.acked[seq] = simAck{id: id, epoch: s.epoch}
				// Every takeover of a newer epoch that already finished
				// must hold it too.
				for e, hist := range w.recovered {
					if e > s.epoch {
						w.checkHolds(e, hist, seq, w.acked[seq])
					}
				}
			}
			w.stats.acked++
		}
		s.acked = a
		if s.bounded && a > s.bound {
			w.failf("%s acknowledged seq %d after a newer epoch's fence reached n-q+1 of its set, which held through %d", s.addr(), a, s.bound)
			return
		}
		if !s.bounded {
			w.fenceBound(s)
		}
	}
}

// fenceBound: once n-q+1 followers of s's set promised a newer epoch, s can
// gather q acknowledgements only with one of them, given before it
// promised: s never acknowledges past what they held of its log then, or
// what it had acknowledged by then.
func (w *world) fenceBound(s *simOwner) {
	var fenced []FollowerID
	for _, id := range s.set {
		if nd := w.nodes[id]; !nd.lost && nd.f.State().Promised > s.epoch {
			fenced = append(fenced, id)
		}
	}
	if len(fenced) < Need(w.n, w.q) {
		return
	}
	bound := s.acked
	for _, id := range fenced {
		bound = max(bound, w.sealed[id][s.epoch])
	}
	s.bounded, s.bound = true, bound
	w.logf("%s fenced at %v: may acknowledge through %d at most", s.addr(), fenced, bound)
}

// settle heals everything and requires progress: the newest epoch's owner
// acknowledges a new commit by quorum, after which a last takeover
// recovers everything.
func (w *world) settle() {
	w.logf("settle")
	w.settling = true
	clear(w.cut)
	for _, id := range w.order {
		if nd := w.nodes[id]; nd.down {
			nd.f, _ = OpenFollower(nd.f.State(), nd.lim)
			nd.down = false
		}
	}
	var target frames.Seq
	for i := 0; i < 200_000 && w.err == nil; i++ {
		w.step++
		s := w.current()
		switch {
		case s == nil:
			w.takeover()
		case s.o == nil:
		case target == 0:
			w.commit(s)
			if h := s.o.Head().Seq; h > frames.Seq(len(w.bucket)) && h > s.o.Acked() {
				target = h
			} else {
				w.upload()
			}
		case s.o.Acked() >= target:
			w.lastTakeover()
			return
		default:
			w.replace(s)
		}
		if len(w.net) > 0 {
			w.deliver(false)
		} else {
			w.tick(50 * time.Millisecond)
		}
		w.check()
	}
	if w.err == nil {
		w.failf("no progress after healing: epoch %d, target seq %d, followers %+v", w.own.epoch, target, w.statusOf(w.current()))
	}
}

func (w *world) statusOf(s *simOwner) any {
	if s == nil || s.o == nil {
		return "no owner"
	}
	return s.o.Followers()
}

// lastTakeover takes over from the settled owner, which runs on as a
// zombie, and checks what it recovers.
func (w *world) lastTakeover() {
	w.takeover()
	s := w.current()
	for i := 0; i < 100_000 && w.err == nil && s.t != nil; i++ {
		w.step++
		if len(w.net) > 0 {
			w.deliver(false)
		} else {
			w.tick(50 * time.Millisecond)
		}
		w.check()
		if w.current() != s {
			w.failf("the last takeover failed: %v", s.err)
			return
		}
	}
	if w.err == nil && s.t != nil {
		w.failf("the last takeover did not finish")
	}
}
