package alarm

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// Defaults for Config's zero fields.
const (
	DefaultScanEvery = 2 * time.Second
	DefaultTimeout   = 15 * time.Minute
)

// Key names an actor of the node: its namespace and its ID.
type Key struct{ Namespace, ID string }

func (k Key) String() string { return k.Namespace + "/" + k.hex() }

// hex is the actor's element in bucket keys (frames.ActorKey).
func (k Key) hex() string { return frames.ActorKey([]byte(k.ID)) }

// Host is what the alarms need of the host that serves the node's actors.
// Its methods take the host's lock; the Service never calls them with its
// own held, so the host may call the Service's and Session's methods with
// its lock held.
type Host interface {
	// Acquire returns the Session of an actor the host serves, opening
	// it (claiming it for this node) first if it does not, and release,
	// which gives that use of the actor back. Its error matches
	// fence.ErrHeld when a live node elsewhere holds the actor, and
	// fence.ErrNotClaiming when the host claims no actor any more (it
	// drains): the alarm is then another node's to run, and nothing is
	// logged.
	Acquire(ctx context.Context, key Key) (s *Session, release func(), err error)
	// Node returns the node the host serves as now: its ID, and its
	// Observer, which judges the liveness of other nodes' leases.
	Node() *fence.Node
	// Draining reports whether the host claims no actor from anyone any
	// more (it drains): the scans then leave overdue alarms of actors
	// held by nobody to the other nodes.
	Draining() bool
}

// Actor is one session of an actor (one ownership epoch) as the host
// serves it, given to its Session. None of its methods may call into the
// Service or a Session, except Release (see there); Use, Release and Run
// may take the host's lock, and are never called with the Service's held.
type Actor interface {
	// Path is the database's file, DSN what opens a connection to it.
	Path() string
	DSN() string
	// Durable returns once every commit so far is durable: what the
	// database acknowledges.
	Durable(ctx context.Context) error
	// Commits counts the database's commits in this session. It is
	// called with the Service's lock held: it takes none of the host's.
	Commits() int64
	// Epoch is the session's ownership epoch.
	Epoch() frames.Epoch
	// Lost is closed once the node that claimed the session is lost: a
	// run of its alarm can then no longer clear it.
	Lost() <-chan struct{}
	// Unusable says why the session can write nothing more (fenced, its
	// node lost, its replication stopped), nil while it can.
	Unusable() error
	// Use takes a use of the actor if the host serves it (open, not
	// dropped or closing, the host not stopped), so that it does not
	// close before Release, and reports whether it did. It is the alarms'
	// own: it does not keep the actor from hibernating.
	Use() bool
	// Release gives back a use Use took, or that the host took for
	// Session.Released; touched counts it as a use of the actor's (a run
	// of its handler), so that its idle time starts again. Like any
	// release of the host's, it calls Session.Released.
	Release(touched bool)
	// Run runs the runtime's handler of the actor's namespace.
	Run(ctx context.Context, run Run) error
}

// Config configures a Service. Bucket is required.
type Config struct {
	// Bucket holds the alarm index and the actors' own.json.
	Bucket bucket.Bucket
	// Tenant is the actors' tenant (session.Config.Tenant; host.Config.VFS.Tenant): a namespace's
	// element in bucket keys is frames.NamespaceID(Tenant, namespace).
	Tenant string
	// Namespaces are those whose alarms this node runs: it schedules and
	// scans only theirs, and a namespace left out is never run here.
	Namespaces []string
	// ScanEvery is the interval between scans of the index of each
	// namespace (default DefaultScanEvery), each jittered by up to a
	// tenth. Negative: never scan; the node then runs only the alarms of
	// the actors it serves (or hibernated), and takes over none.
	ScanEvery time.Duration
	// Timeout bounds one run of a handler (default DefaultTimeout,
	// Durable Objects' limit).
	Timeout time.Duration
	// Backoff is the wait before a failed run's first retry (default
	// DefaultBackoff); each later one waits twice as long.
	Backoff time.Duration
	// Lease and Grace are the nodes' lease timings (fence.Options): an
	// entry left to a live holder elsewhere is checked again once
	// Lease+Grace has passed.
	Lease, Grace time.Duration
	// Clock (default fence.SystemClock).
	Clock fence.Clock
	// Logger (nil: discard). Lines are logged with it as they are: the
	// host gives its own, so that they are the host's lines as they were.
	Logger *slog.Logger
}

// Service keeps the alarms of the actors one node serves: one schedule of
// looks, the runs, the scans of the index, the claims of actors nobody
// alive holds. Safe for concurrent use.
type Service struct {
	cfg     Config
	host    Host
	log     *slog.Logger
	clock   fence.Clock
	handled map[string]struct{}

	// ctx bounds the Service's work: New's ctx, which the host ends as it
	// closes.
	ctx context.Context
	bg  sync.WaitGroup

	mu sync.Mutex
	// stopped: the host stopped serving; nothing new starts.
	stopped bool
	// sessions are the host's actors (open or not) by key, as the host
	// keeps them: from NewSession until Gone.
	sessions map[Key]*Session
	// When to look at actors' alarms (schedule.go), and the scan's claims
	// in flight (scan.go).
	sched schedule
	wake  chan struct{} // the schedule has a new earliest time
	// claiming holds the actors the scan is claiming for an overdue
	// alarm, claimFailed those whose claim failed lately.
	claiming    map[Key]struct{}
	claimFailed map[Key]claimFailure
	warned      map[string]struct{} // bad index keys logged already

	// rescans counts the requests for a full scan of every namespace (a
	// wake-up that could not acquire its actor).
	rescans atomic.Uint64

	stats counters
}

// New starts the alarms of a host: the schedule's loop, and the scans if
// Config.Namespaces has any and Config.ScanEvery is not negative. They
// stop once ctx ends (Wait waits for them).
func New(ctx context.Context, cfg Config, h Host) *Service {
	if cfg.ScanEvery == 0 {
		cfg.ScanEvery = DefaultScanEvery
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Clock == nil {
		cfg.Clock = fence.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	svc := &Service{
		cfg:         cfg,
		host:        h,
		log:         cfg.Logger,
		clock:       cfg.Clock,
		handled:     map[string]struct{}{},
		ctx:         ctx,
		sessions:    map[Key]*Session{},
		sched:       newSchedule(),
		wake:        make(chan struct{}, 1),
		claiming:    map[Key]struct{}{},
		claimFailed: map[Key]claimFailure{},
		warned:      map[string]struct{}{},
	}
	for _, ns := range cfg.Namespaces {
		svc.handled[ns] = struct{}{}
	}
	svc.bg.Add(2)
	go svc.loop()
	go svc.scanLoop()
	return svc
}

// handles reports whether the namespace's alarms run on this node.
func (svc *Service) handles(ns string) bool {
	_, ok := svc.handled[ns]
	return ok
}

// Stop is the host's word that it stopped serving: nothing new starts (no
// run, settle, wake-up or claim), and the work under way ends with New's
// ctx.
func (svc *Service) Stop() {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	svc.stopped = true
}

// Wait waits for the Service's goroutines, which end once New's ctx has
// ended and every use they took is given back.
func (svc *Service) Wait() { svc.bg.Wait() }

// phase is where a Session's actor is, as its host told.
type phase uint8

const (
	// opening: not handed out yet (queued, opening).
	opening phase = iota
	// serving: open, handed out (Opened).
	serving
	// ending: dropped or closing (Closing), until Gone.
	ending
)

// Session is an actor's alarm in one session of the actor on this node
// (one ownership epoch, one host actor): the index entries it wrote or
// superseded and has not deleted, its own connection to the database,
// its runs. The host makes one for each actor it opens (NewSession) and
// tells it where the actor is in its lifecycle: Index on each open,
// Opened, Released after each use given back, Closing, Finish and
// Disconnect as it closes, Gone.
type Session struct {
	svc   *Service
	key   Key
	actor Actor

	// The index entries this session wrote or superseded and has not
	// deleted (index.go), and the connection, under mu.
	mu    sync.Mutex
	notes map[string]note
	noted uint64  // notes taken, to order them
	dirty bool    // an alarm write since the last settle
	pool  *sql.DB // the Session's own connection, for looks and settles

	// Guarded by Service.mu.
	phase    phase
	settling bool // a settle of the index holds a use
	// The alarm's run (fire.go): one at a time, holding a use; the retry
	// of one that failed; a look asked for while not serving yet.
	busy    bool
	retry   retry
	pending time.Time
	// await: a look found a set due but not committed; look again once
	// the database has more than commits commits.
	await   bool
	commits int64
}

// NewSession makes the Session of an actor the host puts in its map,
// before its open starts. Called with the host's lock held.
func (svc *Service) NewSession(key Key, a Actor) *Session {
	s := &Session{svc: svc, key: key, actor: a}
	svc.mu.Lock()
	svc.sessions[key] = s
	svc.mu.Unlock()
	return s
}

func (s *Session) String() string { return s.key.String() }

// Opened is the host's word that it hands the actor out from now on:
// whatever the session was asked to look at meanwhile is scheduled, and a
// wake-up of the actor is forgotten. Called with the host's lock held.
func (s *Session) Opened() {
	svc := s.svc
	svc.mu.Lock()
	defer svc.mu.Unlock()
	s.phase = serving
	delete(svc.sched.wakeups, s.key)
	if at := s.pending; !at.IsZero() {
		s.pending = time.Time{}
		svc.scheduleSessionLocked(s, at)
	}
}

// Released is the host's word that a use of the actor was given back
// (a Handle, or a use of the alarms'): the alarm is looked at again if a
// look waited for a commit, and the index entries an alarm write made
// stale meanwhile are settled in the background. It reports whether that
// settle keeps a use of the actor, which the host then counts as it
// counts any other, and which the settle gives back with Actor.Release.
// Called with the host's lock held, so that the use is counted before
// the settle can give it back.
func (s *Session) Released() bool {
	svc := s.svc
	svc.mu.Lock()
	svc.awaitedCommitLocked(s)
	settle := s.settleSoonLocked()
	svc.mu.Unlock()
	if settle {
		s.startSettle(true) // with the use the host counts
	}
	return settle
}

// Retrying reports whether the actor's alarm failed and waits for its
// retry: the host does not hibernate it meanwhile, as its retry count
// would start over on the next open.
func (s *Session) Retrying() bool {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	return s.retry.n > 0
}

// Closing is the host's word that the actor is no longer handed out: it
// is dropped, or closing. Called with the host's lock held.
func (s *Session) Closing() {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	s.phase = ending
}

// Finish ends the session as its actor closes for good with its database
// still replicating (not stopped, not kept for a Reopen), before the
// database closes: no alarm write can be in flight any more, so every
// index entry the session noted that the database does not hold is
// deleted (what is left is logged). Hibernating, it returns when the
// alarm is due (zero: none, or no handler here), for Gone to keep as a
// wake-up.
func (s *Session) Finish(ctx context.Context, hibernating bool) time.Time {
	if err := s.settle(ctx, true); err != nil {
		s.svc.log.Warn("stale alarm index entries left", logattr.Namespace, s.key.Namespace, logattr.Actor, s.key.hex(), logattr.Err, err)
	}
	if !hibernating {
		return time.Time{}
	}
	return s.wakeAt(ctx)
}

// Gone is the host's word that the actor is out of its map (closed, or
// its open failed). wake, if not zero, is when the alarm of the actor,
// hibernated, is due (Finish): this node acquires the actor again then,
// unless it opened it again meanwhile. Called with the host's lock held.
func (s *Session) Gone(wake time.Time) {
	svc := s.svc
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.sessions[s.key] == s {
		delete(svc.sessions, s.key)
	}
	s.phase = ending
	if wake.IsZero() || svc.stopped || svc.sessions[s.key] != nil {
		return
	}
	svc.sched.wakeups[s.key] = wake
	svc.scheduleLocked(s.key, wake)
}
