package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/session"
)

// Errors callers decide on.
var (
	// ErrStopped: the host no longer serves: Close was called, or its node
	// was lost with Config.StopOnNodeLoss (then the error wraps the node's
	// error too: fence.ErrFenced or fence.ErrLeaseLost).
	ErrStopped = errors.New("host: stopped")
	// ErrLocked: another process holds the lock of a data directory (the
	// host's Config.Dir, or one actor's directory in it).
	ErrLocked = errors.New("host: data directory locked by another process")
	// ErrBadActorID: an actor ID is empty or longer than
	// frames.MaxActorIDBytes.
	ErrBadActorID = errors.New("host: bad actor ID")
	// ErrDraining: the host drains (StopClaiming, Drain) and the actor is
	// not held here: taking it would be a claim from no one, from a
	// released record or from a dead holder (or its claim was under way
	// as the drain began; it was given back). Nobody serves it until a
	// node that is not draining claims it: a runtime answers "try
	// another node" (Handler: 503 with Retry-After). A live holder
	// elsewhere is still a *fence.HeldError, to forward to.
	ErrDraining = errors.New("host: draining: not claiming actors")
)

// Defaults for Config's zero fields.
const (
	DefaultIdle       = 30 * time.Second
	DefaultMaxOpens   = 4
	DefaultSweepAge   = time.Hour
	DefaultSweepEvery = 10 * time.Minute

	DefaultDrainDeadline = 6 * time.Second
	// MaxDrainDeadline: longer deadlines are cut to this. Every actor of
	// the node waits for the hooks before it is released, and requests
	// for it wait meanwhile; a drain must also end within the
	// supervisor's grace (Kubernetes' default is 30 s) with the closes and
	// final flushes still to come.
	MaxDrainDeadline = 10 * time.Second
)

// Config configures a Host. Bucket, Address and Dir are required.
type Config struct {
	// Bucket holds every node's actors and leases.
	Bucket bucket.Bucket
	// Address is host:port where this node serves: written in its lease,
	// it is where peers forward requests for the actors it holds.
	Address string
	// Dir holds this process's local copies, one directory per actor:
	// Dir/<frames.NamespaceID>/<frames.ActorKey>. One process at a time
	// (locked).
	Dir string
	// Lease and Grace are the node's lease timings (fence.Options;
	// defaults fence.DefaultLease, fence.DefaultGrace).
	Lease, Grace time.Duration
	// Idle: an actor with no Handle for this long is closed and released
	// (default DefaultIdle; negative: never).
	Idle time.Duration
	// MaxOpens bounds the opens running at once (claim, restore, first
	// snapshot, Hooks.Opened; default DefaultMaxOpens). A node that takes
	// over a dead peer's actors gets requests for all of them together;
	// unbounded, their restores compete with the lease renewal for the
	// disk and the bucket, and a renewal that starts late ends the node.
	MaxOpens int
	// SweepAge: leases the bucket last wrote longer ago than this, of
	// nodes no own.json names, are deleted (fence.SweepLeases; default
	// DefaultSweepAge; negative: never sweep). It is a wall-clock
	// comparison with the bucket's modification times, so it must dwarf
	// clock skew: at least 2×(Lease+Grace) is enforced, an hour or more is
	// meant.
	SweepAge time.Duration
	// SweepEvery is the interval between sweeps (default
	// DefaultSweepEvery), each one jittered by up to a tenth, the first
	// one at a random point of the first interval.
	SweepEvery time.Duration
	// StopOnNodeLoss: when the node loses its lease, stop (Done, Err)
	// instead of registering a new node and reopening the actors.
	StopOnNodeLoss bool
	// VFS is the template of every actor's session.Config. Bucket, Namespace,
	// Actor, Node, Epoch and Dir are the host's to set and must be zero;
	// Logger defaults to the host's.
	VFS session.Config
	// Hooks run at points of each actor's lifecycle.
	Hooks Hooks
	// Alarms maps each namespace whose alarms this host fires to the
	// runtime's handler (see "Firing" in package alarm's doc). Give every
	// node the same map: the node that holds an actor fires its alarm,
	// and a node without the namespace's handler never does.
	Alarms map[string]AlarmFunc
	// AlarmScanEvery is the interval between scans of the alarm index of
	// each namespace in Alarms (default alarm.DefaultScanEvery), each one
	// jittered by up to a tenth: one listing per namespace per scan.
	// Negative: never scan; this node then runs only the alarms of the
	// actors it holds (or hibernated), and takes over none.
	AlarmScanEvery time.Duration
	// AlarmTimeout bounds one run of an alarm handler (default
	// alarm.DefaultTimeout, Durable Objects' limit).
	AlarmTimeout time.Duration
	// Drain maps each namespace whose actors get a drain hook to it (see
	// "Drain" in the package doc): when the host drains, every open
	// actor of the namespace gets the hook, to write what the runtime
	// keeps in memory to its database before it is released. Actors of
	// other namespaces are closed without one.
	Drain map[string]DrainFunc
	// DrainDeadline bounds the drain hooks, all of them together, from
	// the start of the first one: zero means DefaultDrainDeadline, more
	// than MaxDrainDeadline means MaxDrainDeadline, and negative means a
	// deadline of 0: no hook runs, and the actors are closed at once.
	DrainDeadline time.Duration
	// Clock is the time source of leases and idle times (default
	// fence.SystemClock).
	Clock fence.Clock
	// Peers, when set, makes the actors' commits acknowledged by followers
	// on other nodes (PeersConfig); nil: by the bucket alone.
	Peers *PeersConfig
	// Logger (nil: discard).
	Logger *slog.Logger

	// alarmBackoff is the first retry's backoff (default
	// alarm.DefaultBackoff); the package's tests shorten it.
	alarmBackoff time.Duration
}

// Hooks are the runtime's part of an actor's lifecycle. Each is optional.
type Hooks struct {
	// Opened runs once per open, after session.Open (or Reopen) returned and
	// before any Acquire returns the actor: create the schema, open
	// connections, SetValue what the runtime keeps per actor. It runs
	// within Config.MaxOpens. An error closes the database (releasing the
	// claim) and fails the Acquires waiting for it.
	Opened func(ctx context.Context, a *Actor) error
	// Closing runs once per successful open, when no Handle is left,
	// before the database closes (idle, stopped, node lost, Close): close
	// what Opened opened. framectl.DB.Close needs every connection closed.
	Closing func(ctx context.Context, a *Actor)
}

// Timeouts of the host's own work.
const (
	// openTimeout bounds one attempt to open an actor: claim, restore,
	// first snapshot upload, Hooks.Opened. A restore of a large actor over
	// a slow link is the long part.
	openTimeout = 5 * time.Minute
	// closeTimeout bounds one close: Hooks.Closing, final flush, release.
	closeTimeout = time.Minute
)

// Host serves actors on one node. Safe for concurrent use.
type Host struct {
	cfg   Config
	log   *slog.Logger
	clock fence.Clock

	// ctx bounds background work (opens, recovery, sweeps, hibernation);
	// Close cancels it. Closes of actors outlive it (context.WithoutCancel).
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	// opening bounds the opens running at once (Config.MaxOpens).
	opening chan struct{}

	unlockDir func()

	peers *peering // nil without Config.Peers

	mu        sync.Mutex
	node      *fence.Node
	recovered chan struct{}       // non-nil while a new node is being registered
	earlier   map[string]struct{} // IDs of this host's earlier nodes
	suspects  map[string]time.Time
	actors    map[actorKey]*Actor
	stopErr   error // non-nil once stopped: ErrStopped, wrapped
	done      chan struct{}
	// draining: StopClaiming was called; the node (and any next one)
	// claims only what own.json gives it already.
	draining bool

	// alarms keeps the actors' alarms (alarm.go): set once in New.
	alarms *alarm.Service

	stats counters // for Stats (stats.go)
}

// New locks cfg.Dir, registers the node's lease, and starts serving.
func New(ctx context.Context, cfg Config) (*Host, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	unlock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	fopts := fence.Options{Lease: cfg.Lease, Grace: cfg.Grace, Clock: cfg.Clock, Logger: cfg.Logger}
	var peers *peering
	if cfg.Peers != nil {
		if peers, err = startPeering(ctx, cfg); err != nil {
			unlock()
			return nil, err
		}
		fopts.PeerAddress, fopts.Follower = peers.addr, peers.store.ID()
	}
	node, err := fence.Register(ctx, cfg.Bucket, cfg.Address, fopts)
	if err != nil {
		if peers != nil {
			peers.close()
		}
		unlock()
		return nil, fmt.Errorf("host: %w", err)
	}
	if peers != nil {
		peers.retire(ctx, node, cfg.Logger)
		pc := cfg.Peers
		peers.leases = quorum.NewLeases(node, peers.node)
		peers.hub, err = quorum.New(quorum.Config{Self: follow.FollowerID(peers.store.ID()), Transport: peers.node, Store: peers.store,
			Directory: peers.leases, Limits: pc.Limits, Followers: pc.Followers, Quorum: pc.Quorum, Logger: cfg.Logger})
		if err != nil {
			peers.close()
			node.Close(ctx)
			unlock()
			return nil, fmt.Errorf("host: %w", err)
		}
		peers.suspicion = &quorum.Suspicion{Self: follow.FollowerID(peers.store.ID()), Detector: peers.node, Directory: peers.leases,
			Logger: cfg.Logger.With(logattr.Subsystem, logattr.SubsystemQuorum)}
		go peers.node.Serve(context.Background(), peers.ln)
	}
	bctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		cfg:       cfg,
		log:       cfg.Logger.With(logattr.Subsystem, logattr.SubsystemHost),
		clock:     cfg.Clock,
		ctx:       bctx,
		cancel:    cancel,
		opening:   make(chan struct{}, cfg.MaxOpens),
		unlockDir: unlock,
		node:      node,
		peers:     peers,
		earlier:   map[string]struct{}{},
		suspects:  map[string]time.Time{},
		actors:    map[actorKey]*Actor{},
		done:      make(chan struct{}),
	}
	h.alarms = alarm.New(bctx, h.alarmConfig(), hostForAlarms{h})
	h.bg.Add(3)
	go h.watchNode()
	go h.hibernateLoop()
	go h.sweepLoop()
	if peers != nil {
		h.bg.Add(1)
		go h.identityLoop()
	}
	h.log.Info("host serving", logattr.Node, node.ID(), logattr.Address, cfg.Address, "dir", cfg.Dir,
		"idle", cfg.Idle, "maxOpens", cfg.MaxOpens, "sweepAge", cfg.SweepAge)
	return h, nil
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Bucket == nil:
		return c, errors.New("host: Config.Bucket is required")
	case c.Address == "":
		return c, errors.New("host: Config.Address is required")
	case c.Dir == "":
		return c, errors.New("host: Config.Dir is required")
	case c.VFS.Bucket != nil || c.VFS.Namespace != "" || c.VFS.Actor != nil || c.VFS.Node != nil || c.VFS.Epoch != 0 || c.VFS.Dir != "":
		return c, errors.New("host: Config.VFS: Bucket, Namespace, Actor, Node, Epoch and Dir are set by the host")
	}
	if c.Peers != nil {
		pc := *c.Peers // the caller's stays as it was
		if pc.IdentityCheck <= 0 {
			pc.IdentityCheck = DefaultIdentityCheck
		}
		c.Peers = &pc
	}
	if c.Lease <= 0 {
		c.Lease = fence.DefaultLease
	}
	if c.Grace <= 0 {
		c.Grace = fence.DefaultGrace
	}
	if c.Idle == 0 {
		c.Idle = DefaultIdle
	}
	if c.MaxOpens <= 0 {
		c.MaxOpens = DefaultMaxOpens
	}
	if c.SweepAge == 0 {
		c.SweepAge = DefaultSweepAge
	}
	if c.SweepAge > 0 && c.SweepAge < 2*(c.Lease+c.Grace) {
		return c, fmt.Errorf("host: Config.SweepAge %v is shorter than 2×(Lease+Grace) = %v", c.SweepAge, 2*(c.Lease+c.Grace))
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	for ns, fn := range c.Alarms {
		if fn == nil {
			return c, fmt.Errorf("host: Config.Alarms: namespace %q has a nil handler", ns)
		}
	}
	for ns, fn := range c.Drain {
		if fn == nil {
			return c, fmt.Errorf("host: Config.Drain: namespace %q has a nil hook", ns)
		}
	}
	switch {
	case c.DrainDeadline == 0:
		c.DrainDeadline = DefaultDrainDeadline
	case c.DrainDeadline > MaxDrainDeadline:
		c.DrainDeadline = MaxDrainDeadline
	}
	if c.Clock == nil {
		c.Clock = fence.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.VFS.Logger == nil {
		c.VFS.Logger = c.Logger
	}
	return c, nil
}

// Node returns the node this host serves as now. It changes when the host
// recovers from losing its lease (a new node, a new ID).
func (h *Host) Node() *fence.Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node
}

// Address returns Config.Address.
func (h *Host) Address() string { return h.cfg.Address }

// Done is closed when the host stops serving: Close was called, or the
// node was lost with Config.StopOnNodeLoss. Err says why.
func (h *Host) Done() <-chan struct{} { return h.done }

// Err returns why the host stopped (matching ErrStopped), nil while it
// serves.
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopErr
}

// stopLocked ends serving, once. Called with h.mu held.
func (h *Host) stopLocked(err error) {
	if h.stopErr != nil {
		return
	}
	h.stopErr = err
	h.alarms.Stop()
	close(h.done)
}

// Close stops serving and lets every actor go: opens in progress are
// cancelled (their claims given back), each open actor is closed once its
// last Handle is released (final flush, then own.json released, so peers
// claim it at once with the next epoch), then the node deregisters. Close
// waits for all of it until ctx ends; release every Handle first (an HTTP
// server's Shutdown does, for Handler's).
//
// The error joins what failed: a close that could not flush or release,
// ctx's error if it ended first, and the node's error (fence.ErrFenced,
// fence.ErrLeaseLost) if the node was no longer live, in which case the
// actors could not be released and peers take them over once the node's
// lease has run out. Drain is Close after the drain hooks.
func (h *Host) Close(ctx context.Context) error { return h.shutdown(ctx, "host closing") }

// shutdown is Close, closing idle actors for why.
func (h *Host) shutdown(ctx context.Context, why string) error {
	h.mu.Lock()
	h.stopLocked(ErrStopped)
	h.cancel()
	all := make([]*Actor, 0, len(h.actors))
	for _, a := range h.actors {
		all = append(all, a)
		if a.refs == 0 {
			h.closeLocked(a, why)
		}
	}
	node := h.node
	h.mu.Unlock()

	var errs []error
	lost := node.Err() != nil
	finished := true
	for _, a := range all {
		select {
		case <-a.gone:
			if a.closeErr != nil && !lost {
				errs = append(errs, a.closeErr)
			}
		case <-ctx.Done():
			finished = false
		}
		if !finished {
			errs = append(errs, fmt.Errorf("host: closing actors: %w", ctx.Err()))
			break
		}
	}
	if err := node.Err(); err != nil {
		errs = append(errs, err)
	} else if err := node.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if finished {
		// Every actor is gone and nothing new starts once stopped: only
		// the background loops are left, and they end with h.ctx. The
		// alarms' first: their last releases may start a close.
		h.alarms.Wait()
		h.bg.Wait()
		if h.peers != nil {
			if err := h.peers.close(); err != nil {
				errs = append(errs, fmt.Errorf("host: %w", err))
			}
		}
		h.unlockDir()
	}
	return errors.Join(errs...)
}

// State is where an actor is in its lifecycle.
type State uint8

const (
	// Queued: waiting for one of Config.MaxOpens.
	Queued State = iota + 1
	// Opening: claiming, restoring, starting its session, Hooks.Opened.
	Opening
	// Open: serving.
	Open
	// Closing: Hooks.Closing, final flush, release.
	Closing
)

func (s State) String() string {
	switch s {
	case Queued:
		return "queued"
	case Opening:
		return "opening"
	case Open:
		return "open"
	case Closing:
		return "closing"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ActorInfo describes one actor of the host.
type ActorInfo struct {
	Namespace string
	ID        []byte
	State     State
	// Handles counts the Handles not released (and, while the actor
	// opens, the Acquires waiting for it).
	Handles int
	// IdleFor is how long the actor has had no Handle (0 while it has one
	// or is not open).
	IdleFor time.Duration
	// Epoch and Stats describe its database while it is open or closing.
	Epoch frames.Epoch
	Stats session.Stats
}

// Actors describes every actor the host has, in no particular order.
func (h *Host) Actors() []ActorInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	out := make([]ActorInfo, 0, len(h.actors))
	for _, a := range h.actors {
		info := ActorInfo{Namespace: a.key.ns, ID: []byte(a.key.id), State: a.state, Handles: a.refs}
		if a.state == Open || a.state == Closing {
			info.Epoch, info.Stats = a.db.Epoch(), a.db.Stats()
			if a.refs == 0 && a.state == Open {
				info.IdleFor = now.Sub(a.lastUsed)
			}
		}
		out = append(out, info)
	}
	return out
}

// actorDir is where an actor's local copy lives.
func (h *Host) actorDir(k actorKey) string {
	return filepath.Join(h.cfg.Dir, h.namespaceID(k.ns), frames.ActorKey([]byte(k.id)))
}

// namespaceID is a namespace's element in bucket keys and in Dir.
func (h *Host) namespaceID(ns string) string { return frames.NamespaceID(h.cfg.VFS.Tenant, ns) }
