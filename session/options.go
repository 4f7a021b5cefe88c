package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// Mode says when a commit counts as acknowledged.
type Mode uint8

const (
	// Async: a commit returns after the local WAL write; Durable(ctx)
	// waits until everything committed before the call is in the bucket.
	// This is the output gate of an actor runtime: hold replies until
	// Durable returns.
	Async Mode = iota
	// Sync: a commit returns only once it is in the bucket; if that fails
	// (timeout, fenced, replication stopped) the commit statement returns
	// an I/O error. The transaction is then in the local database but not
	// confirmed durable.
	Sync
)

func (m Mode) String() string {
	switch m {
	case Async:
		return "async"
	case Sync:
		return "sync"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Config opens one replicated database.
type Config struct {
	// Bucket receives the database's objects.
	Bucket bucket.Bucket
	// Tenant (empty by default) and Namespace name the actor's namespace;
	// the bucket path element is frames.NamespaceID(Tenant, Namespace).
	Tenant, Namespace string
	// Actor is the actor's ID (1 to 128 bytes).
	Actor []byte
	// Node, when set, makes Open claim the actor for this node (package
	// fence) and take the claim's epoch; acknowledgements then also need
	// the node's lease to be valid, and Close releases the actor.
	Node *fence.Node
	// Suspect, with Node, lets the claim take the actor from a holder
	// whose lease is alive once failure detection confirms it gone
	// (fence.ClaimOptions.Suspect; a host in peer mode gives
	// quorum.Suspicion.Confirm). nil: a claim waits for the lease.
	Suspect func(ctx context.Context, held fence.Record, lease fence.Lease) error
	// Epoch is the ownership epoch of this session when Node is nil: every
	// object this database writes goes under it, and it must be greater
	// than every epoch that wrote this actor before.
	Epoch frames.Epoch
	// Dir is the local directory holding the database file (db.sqlite) and
	// its replication state (framectl.state). Created if missing. One
	// process at a time may use it.
	Dir string
	// Mode is Async (default) or Sync.
	Mode Mode

	// PageSize for a new database (default 4096). An existing database
	// keeps its own.
	PageSize int
	// MaxBatchBytes closes a batch once its page bytes reach this size
	// (default 16 MiB); larger uploads are split at commit boundaries.
	MaxBatchBytes int
	// MaxPendingBytes bounds page bytes captured but not yet uploaded
	// (default 64 MiB). Past it, new writes wait (backpressure) for up to
	// BackpressureTimeout, then fail with ErrBackpressure.
	MaxPendingBytes int
	// BackpressureTimeout: see MaxPendingBytes (default 30 s).
	BackpressureTimeout time.Duration
	// SyncTimeout bounds how long a commit waits for its upload in Sync
	// mode before the statement fails (default 30 s).
	SyncTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between upload attempts
	// (defaults 50 ms and 5 s). A failed upload is retried until it
	// succeeds or the database is fenced or closed.
	RetryMin, RetryMax time.Duration
	// UploadInterval is the shortest time between the starts of two
	// uploads while nobody waits for the bucket (pace.go): a Durable call,
	// a Sync commit, backpressure, a full batch or Close starts an upload
	// at once regardless. Zero means the default: DefaultDirUploadInterval
	// for a directory bucket, whose PUTs fsync the disk the database is on;
	// DefaultS3UploadInterval for an S3 bucket (*bucket.S3), whose PUTs are
	// billed one by one; no pacing for other buckets (wrappers choose
	// their own, but one that only observes the bucket it wraps and says
	// so with an Unwrap() bucket.Bucket method, as package metrics's does,
	// is paced as that bucket). Negative: never pace.
	UploadInterval time.Duration
	// DisableCompaction turns off the background compaction passes
	// (compaction.go): the log then grows until something else compacts
	// the actor (framectl compact).
	DisableCompaction bool
	// Compaction bounds how often the background passes run on a small
	// database written fast (compact.Rule: a minimum log and a minimum
	// interval between passes; the zero value is compact's defaults).
	Compaction compact.Rule
	// KeptBytes bounds the copies of its own uploads the session keeps on
	// disk under Dir/kept, which compaction passes read instead of the
	// bucket (kept.go). Zero means DefaultKeptBytes; negative keeps none
	// (every pass then reads the bucket).
	KeptBytes int64
	// Retention keeps covered objects for point-in-time restore for this
	// long (compact.Options.Retention; default 0).
	Retention time.Duration
	// Unacknowledged decides what Open does with commits the local copy
	// holds that never reached the bucket (the process stopped before
	// uploading them): see Unacknowledged. Either way Stats reports how
	// many there were.
	Unacknowledged Unacknowledged
	// ListingWait bounds how long Open waits for the bucket's listing to
	// show what this directory's state file says was uploaded (some
	// S3-compatible stores list new keys late) before it fails with
	// ErrListingBehind rather than restore an older state (default 30 s).
	ListingWait time.Duration
	// Compression is the DEFLATE level of batches and manifests, and the
	// level zstd chunks map it to (default frames.DefaultLevel: zstd's
	// fastest for chunks).
	Compression int
	// Observer is told of the database's events as they happen (durable
	// waits, compaction passes, restores), for metrics; its zero value is
	// told nothing.
	Observer Observer
	// Acknowledge, if set, is asked before Durable reports success or a
	// Sync commit returns: a non-nil error (for example the node's lease
	// has expired) refuses the acknowledgement. Package fence provides it.
	Acknowledge func() error
	// ReadProofAge bounds how stale a read-only reply may be (proof.go): a
	// Durable call with nothing new to acknowledge (every commit it covers
	// was acknowledged before), by the bucket or by followers, passes on a
	// read of own.json that found the claim and began less than this ago,
	// and reads own.json again otherwise (default DefaultReadProofAge;
	// negative: every such call reads it). Writes are never acknowledged
	// on an old proof. Only with Node: without one there is no claim to
	// prove.
	ReadProofAge time.Duration
	// confirm, set by Open with a node, is the proof of ownership
	// (fence.Node.Confirm of the session's claim).
	confirm func(context.Context) error
	// Peers, with Node set, acknowledges commits once q of the actor's
	// followers hold them, or the bucket does, whichever comes first
	// (peers.go); package quorum provides it. Nil: the bucket alone.
	Peers Peers
	// PeerWait is how long a Durable call (or Sync commit) waits for the
	// followers before it asks the bucket too (default DefaultPeerWait).
	PeerWait time.Duration
	// Logger receives replication events (nil: discard).
	Logger *slog.Logger
}

// Unacknowledged is what Open does with local commits that are not in the
// bucket: commits captured by a session whose process stopped (crash, kill,
// lost lease) before they were uploaded.
type Unacknowledged uint8

const (
	// UnacknowledgedDefault keeps them without a Node and discards them with
	// one: a plain application that wrote them expects them kept; an actor
	// runtime never replied to the requests that made them.
	UnacknowledgedDefault Unacknowledged = iota
	// KeepUnacknowledged makes them part of the new session: its first
	// snapshot is the local copy as it is. Only when the local copy provably
	// continues the bucket's newest session (same directory, same boot, no
	// other owner wrote since); otherwise they are kept aside as below.
	KeepUnacknowledged
	// DiscardUnacknowledged restores the bucket's newest state over them,
	// as if they never happened.
	DiscardUnacknowledged
)

func (u Unacknowledged) String() string {
	switch u {
	case UnacknowledgedDefault:
		return "default"
	case KeepUnacknowledged:
		return "keep"
	case DiscardUnacknowledged:
		return "discard"
	}
	return fmt.Sprintf("Unacknowledged(%d)", uint8(u))
}

// Defaults for Config's zero fields.
const (
	DefaultPageSize            = 4096
	DefaultMaxBatchBytes       = 16 << 20
	DefaultMaxPendingBytes     = 64 << 20
	DefaultBackpressureTimeout = 30 * time.Second
	DefaultSyncTimeout         = 30 * time.Second
	DefaultRetryMin            = 50 * time.Millisecond
	DefaultRetryMax            = 5 * time.Second
	DefaultDirUploadInterval   = 250 * time.Millisecond // chosen by measurement: pace.go
	DefaultS3UploadInterval    = time.Second            // chosen by measurement: pace.go
	DefaultListingWait         = 30 * time.Second
	// DefaultPeerUploadInterval paces uploads with followers (Config.Peers):
	// they hold what the bucket does not yet, so the bucket is written in
	// the background, in batches of up to MaxBatchBytes or this long.
	DefaultPeerUploadInterval = 10 * time.Second
	// DefaultPeerWait is Config.PeerWait's default: a hundred times a
	// follower's round trip and fsync on a LAN, and short enough that an
	// acknowledgement without a quorum costs about a PUT more.
	DefaultPeerWait = 500 * time.Millisecond
	// DefaultReadProofAge is Config.ReadProofAge's default: a read-only
	// reply is at most about a second staler than the bucket, and an
	// actor that only serves reads costs at most one GET of own.json a
	// second.
	DefaultReadProofAge = time.Second
	// DefaultKeptBytes holds every object a pass reads for a database of
	// up to about 40 MB of compressible pages: a pass then makes no GET
	// but own.json's. Larger databases fetch what does not fit.
	DefaultKeptBytes = 64 << 20
)

func (c Config) withDefaults() (Config, error) {
	if c.Bucket == nil {
		return c, errors.New("session: Config.Bucket is nil")
	}
	if len(c.Actor) == 0 || len(c.Actor) > frames.MaxActorIDBytes {
		return c, fmt.Errorf("session: actor ID must be 1 to %d bytes, got %d", frames.MaxActorIDBytes, len(c.Actor))
	}
	if c.Epoch == 0 && c.Node == nil {
		return c, errors.New("session: set Config.Node, or Config.Epoch to at least 1")
	}
	if c.Dir == "" {
		return c, errors.New("session: Config.Dir is empty")
	}
	if c.Mode != Async && c.Mode != Sync {
		return c, fmt.Errorf("session: unknown mode %d", c.Mode)
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if !frames.ValidPageSize(uint32(c.PageSize)) {
		return c, fmt.Errorf("session: page size %d is not a power of two in 512..65536", c.PageSize)
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.BackpressureTimeout <= 0 {
		c.BackpressureTimeout = DefaultBackpressureTimeout
	}
	if c.SyncTimeout <= 0 {
		c.SyncTimeout = DefaultSyncTimeout
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.Peers != nil {
		if c.Node == nil {
			return c, errors.New("session: Config.Peers needs Config.Node: followers fence by the claim's epoch")
		}
		if c.Unacknowledged == KeepUnacknowledged {
			return c, errors.New("session: Config.Peers cannot keep unacknowledged local commits: a takeover recovers what was acknowledged from the followers")
		}
		if c.UploadInterval == 0 {
			c.UploadInterval = DefaultPeerUploadInterval
		}
		if c.PeerWait <= 0 {
			c.PeerWait = DefaultPeerWait
		}
	}
	if c.ReadProofAge == 0 {
		c.ReadProofAge = DefaultReadProofAge
	}
	if c.UploadInterval == 0 {
		switch underlying(c.Bucket).(type) {
		case *bucket.Dir:
			c.UploadInterval = DefaultDirUploadInterval
		case *bucket.S3:
			c.UploadInterval = DefaultS3UploadInterval
		}
	}
	switch c.Unacknowledged {
	case UnacknowledgedDefault:
		c.Unacknowledged = KeepUnacknowledged
		if c.Node != nil {
			c.Unacknowledged = DiscardUnacknowledged
		}
	case KeepUnacknowledged, DiscardUnacknowledged:
	default:
		return c, fmt.Errorf("session: unknown Unacknowledged %d", c.Unacknowledged)
	}
	if c.KeptBytes == 0 {
		c.KeptBytes = DefaultKeptBytes
	}
	if c.ListingWait <= 0 {
		c.ListingWait = DefaultListingWait
	}
	if c.Compression == 0 {
		c.Compression = frames.DefaultLevel
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Errors callers decide on. Durable returns them wrapped; a statement whose
// write was refused returns SQLite's I/O error, and Refusal turns that back
// into one of these.
var (
	// ErrFenced: another owner took the database over; nothing more is
	// acknowledged and writes are refused.
	ErrFenced = errors.New("session: fenced: another owner holds this database")
	// ErrClosed: the database was closed.
	ErrClosed = errors.New("session: database closed")
	// ErrBackpressure: too many bytes are waiting for the bucket; the write
	// was refused after waiting BackpressureTimeout.
	ErrBackpressure = errors.New("session: replication backlog full")
	// ErrStopped: replication met a write it cannot account for (a foreign
	// writer, a database not in WAL mode) and stopped; see the wrapped
	// cause. The database refuses writes.
	ErrStopped = errors.New("session: replication stopped")
	// ErrSyncTimeout: in Sync mode, a commit's upload did not finish within
	// SyncTimeout.
	ErrSyncTimeout = errors.New("session: commit not uploaded within the sync timeout")
	// ErrListingBehind: Open found the bucket's listing behind what this
	// directory's state file says was uploaded, for longer than
	// ListingWait: the listing is stale, or objects were deleted. Open
	// does not restore an older state over the local copy; the local copy
	// is left as it is.
	ErrListingBehind = errors.New("session: the bucket's listing is behind the local copy")
)

// underlying returns the bucket b observes, through every wrapper that says
// what it wraps (Unwrap), so that observing a bucket does not change how
// it is paced (Config.UploadInterval).
// A wrapper that unwraps to itself cannot make it loop.
func underlying(b bucket.Bucket) bucket.Bucket {
	for range 16 {
		w, ok := b.(interface{ Unwrap() bucket.Bucket })
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	return b
}
