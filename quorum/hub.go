package quorum

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/tails"
)

// Transport carries follow messages to other nodes, naming the actor
// (peer.Node).
type Transport interface {
	Send(to follow.FollowerID, actor string, m follow.Message) error
}

// Directory is what a hub knows of the cluster: which followers are live,
// how to reach them, and how to record a set in own.json. Leases
// (leases.go) is the one over fence's node leases.
type Directory interface {
	// Candidates returns the live nodes, other than this one, that may
	// follow an actor this node owns, most preferred first.
	Candidates(ctx context.Context) ([]follow.FollowerID, error)
	// Locate makes id reachable through the transport (its address, from
	// its lease), or says why it is not.
	Locate(ctx context.Context, id follow.FollowerID) error
	// Record writes the follower set into own.json, conditional on own
	// (fence.Node.RecordFollowers), and returns the ownership to go on
	// with.
	Record(ctx context.Context, own fence.Ownership, set []follow.FollowerID, quorum int) (fence.Ownership, error)
	// Claimed reads the epoch actor a's own.json holds (fence.ReadRecord;
	// a missing record matches bucket.ErrNotFound): what this node, as a
	// follower, checks before it promises a newer epoch (admit.go).
	Claimed(ctx context.Context, a frames.Actor) (frames.Epoch, error)
}

// Defaults of Config.
const (
	// DefaultFollowers: with a majority quorum (2), an acknowledged commit
	// survives the owner and any one follower lost, and both acknowledging
	// and taking over go on with one follower unreachable (follow: "What
	// an acknowledged commit survives").
	DefaultFollowers = 3
	// DefaultTick is how often every session's protocol lets time pass:
	// a quarter of follow.DefaultRetransmit.
	DefaultTick = 50 * time.Millisecond
)

// Config sets up a Hub.
type Config struct {
	// Self is this node's ID, as the transport names it.
	Self follow.FollowerID
	// Transport sends to other nodes.
	Transport Transport
	// Store, when set, makes this node a follower of whoever sends it
	// Fence and Append messages; nil: it follows nobody.
	Store *tails.Store
	// Directory finds followers and records them.
	Directory Directory
	// Limits are the cluster's (the store's must be the same).
	Limits follow.Limits
	// Followers (n) a session chooses (default DefaultFollowers), and its
	// Quorum (q; default a majority, n/2+1, of the n chosen).
	Followers, Quorum int
	// Retransmit, TakeoverWait: follow.OwnerConfig and follow.TakeoverConfig
	// (their defaults when zero).
	Retransmit, TakeoverWait time.Duration
	// Tick: DefaultTick when zero.
	Tick time.Duration
	// ReplaceCheck and ReplaceWait: how often the hub looks for
	// followers to replace, and how long a newcomer may take to catch up
	// (replace.go; DefaultReplaceCheck and DefaultReplaceWait when zero).
	ReplaceCheck, ReplaceWait time.Duration
	// Logger receives the hub's events (nil: discard).
	Logger *slog.Logger
}

// Hub is one node's part in the follower protocol of every actor (the
// package documentation says what it routes where). Safe for concurrent
// use.
type Hub struct {
	cfg Config
	log *slog.Logger

	// stopped, once set, is why this node follows nobody any more
	// (StopFollowing).
	stopped atomic.Pointer[error]

	mu       sync.Mutex
	sessions map[string]*Session // by actor name
	closed   bool
	stop     chan struct{}
	done     chan struct{} // tickLoop ended
	// replaceDone: replaceLoop ended (replace.go)
	replaceDone chan struct{}

	stats hubCounters
}

// New starts a hub and its ticker; Close stops them.
func New(cfg Config) (*Hub, error) {
	if cfg.Self == "" || cfg.Transport == nil || cfg.Directory == nil {
		return nil, errors.New("quorum: Config needs Self, Transport and Directory")
	}
	if cfg.Followers <= 0 {
		cfg.Followers = DefaultFollowers
	}
	if cfg.Quorum < 0 || cfg.Quorum > cfg.Followers {
		return nil, fmt.Errorf("quorum: quorum %d of %d followers", cfg.Quorum, cfg.Followers)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.ReplaceCheck <= 0 {
		cfg.ReplaceCheck = DefaultReplaceCheck
	}
	if cfg.ReplaceWait <= 0 {
		cfg.ReplaceWait = DefaultReplaceWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Hub{cfg: cfg, log: cfg.Logger.With(logattr.Subsystem, logattr.SubsystemQuorum, logattr.Node, cfg.Self),
		sessions: map[string]*Session{}, stop: make(chan struct{}), done: make(chan struct{}), replaceDone: make(chan struct{})}
	go h.tickLoop()
	go h.replaceLoop()
	return h, nil
}

// ActorName is the name an actor has in the follower protocol and in the
// followers' stores: its namespace and ID, or, for an ID too long for
// follow.MaxActorBytes, its namespace and the SHA-256 of its ID. Every node
// derives the same name.
func ActorName(a frames.Actor) string {
	name := a.Namespace + "/" + a.Actor
	if len(name) <= follow.MaxActorBytes {
		return name
	}
	sum := sha256.Sum256([]byte(a.Actor))
	return a.Namespace + "/#" + hex.EncodeToString(sum[:])
}

// Handle takes a message the transport delivered (peer.Handler).
func (h *Hub) Handle(from follow.FollowerID, actor string, m follow.Message) {
	switch m.(type) {
	case *follow.Fence, *follow.Append:
		h.follow(from, actor, m)
	case *follow.Promise, *follow.Ack, *follow.Refuse:
		h.mu.Lock()
		s := h.sessions[actor]
		h.mu.Unlock()
		if s == nil {
			h.stats.late.Add(1)
			return
		}
		s.receive(from, m)
	}
}

// follow hands a message to this node's store, as the actor's follower,
// and sends the reply it made durable.
func (h *Hub) follow(from follow.FollowerID, actor string, m follow.Message) {
	if h.cfg.Store == nil || h.stopped.Load() != nil {
		return
	}
	if refusal, ok := h.admit(from, actor, m); !ok {
		if refusal != nil {
			h.send(from, actor, refusal)
		}
		return
	}
	reply, err := h.cfg.Store.Handle(actor, m)
	if err != nil {
		h.stats.storeErrors.Add(1)
		h.log.Warn("follower store", logattr.Actor, actor, "from", from, logattr.Err, err)
	}
	h.promised(m, reply) // fences.go; before the reply leaves, so a takeover that got it sees it counted
	if reply != nil {
		h.send(from, actor, reply)
	}
}

// StopFollowing makes this node's follower store take no message from now
// on, for good: for a node whose store the bucket says was copied and
// opened elsewhere under the same follower ID (host), where two stores
// answering as one follower could each be counted for the other. Owners
// see the follower as unreachable and replace it.
func (h *Hub) StopFollowing(why error) {
	if h.stopped.CompareAndSwap(nil, &why) {
		h.log.Warn("follower store stopped", logattr.Err, why)
	}
}

// send sends m to a node: in-process to this one.
func (h *Hub) send(to follow.FollowerID, actor string, m follow.Message) {
	if to == h.cfg.Self {
		h.Handle(h.cfg.Self, actor, m)
		return
	}
	if err := h.cfg.Transport.Send(to, actor, m); err != nil {
		// follow resends what is not acknowledged; a refused send is a
		// lost message.
		h.stats.sendErrors.Add(1)
	}
}

func (h *Hub) sendAll(actor string, out []follow.Envelope) {
	for _, e := range out {
		h.send(e.To, actor, e.Msg)
	}
}

// everySession calls step with the hub's sessions each period, until the
// hub stops, then closes done: the loop of tickLoop and replaceLoop. step
// runs without h.mu held, so it may lock each session.
func (h *Hub) everySession(done chan<- struct{}, period time.Duration, step func(now time.Time, ss []*Session)) {
	defer close(done)
	t := time.NewTicker(period)
	defer t.Stop()
	var ss []*Session
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.mu.Lock()
			for _, s := range h.sessions {
				ss = append(ss, s)
			}
			h.mu.Unlock()
			step(now, ss)
			clear(ss)
			ss = ss[:0]
		}
	}
}

// tickLoop lets time pass in every session's protocol each Config.Tick:
// follow's resends and timeouts.
func (h *Hub) tickLoop() {
	h.everySession(h.done, h.cfg.Tick, func(now time.Time, ss []*Session) {
		for _, s := range ss {
			s.tick(now)
		}
	})
}

// register makes s the session of its actor on this node.
func (h *Hub) register(s *Session) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("quorum: hub closed")
	}
	if old := h.sessions[s.actor]; old != nil && old != s {
		return fmt.Errorf("quorum: actor %s already has a session on this node", s.actor)
	}
	h.sessions[s.actor] = s
	return nil
}

func (h *Hub) unregister(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.actor] == s {
		delete(h.sessions, s.actor)
	}
}

// Close stops the ticker; sessions left acknowledge nothing more.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	<-h.replaceDone
}
