package compact

import (
	"log/slog"
	"os"
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// Options tune a pass. The zero value is the default: no retention, the
// size rule decides, the system's temporary directory, nothing logged.
type Options struct {
	// Retention keeps covered objects, and superseded sessions along the
	// current session's lineage, while they may be needed to restore to a
	// time less than Retention ago (see retention.go); what no restore
	// reaches (a session the lineage passes over, what a session holds past
	// the point its successor continued from) goes whatever the window
	// (lineage.go). The default, 0, deletes covered objects as soon as
	// they are covered: history costs storage in proportion to what an
	// actor writes, so a window is the operator's choice. A longer
	// retention recorded in the actor's own.json (the writer's,
	// fence.Record.Retention) wins, unless ShortenRetention is set: a
	// compaction run by someone else never cuts the history the writer
	// keeps without saying so.
	Retention time.Duration
	// ShortenRetention applies Retention even when own.json records a
	// longer one (framectl compact --shorten-retention).
	ShortenRetention bool
	// Now is the clock Retention is measured on, against the modification
	// times the bucket lists (nil: time.Now). Tests move it instead of
	// sleeping.
	Now func() time.Time
	// Limits bound what the pass decodes (frames.Limits defaults).
	Limits frames.Limits
	// Compression is the DEFLATE level of the snapshot written, and the
	// level its zstd chunks map it to (default frames.DefaultLevel). Two compactors writing the same snapshot with
	// different levels write different bytes of the same content; either is
	// right.
	Compression int
	// ScratchDir holds the database rebuilt and the snapshot before upload
	// (default os.TempDir()). It needs the database's size plus its
	// compressed size free. Prefer a directory on disk over a tmpfs /tmp.
	ScratchDir string
	// Logger receives what the pass does (nil: discard), under subsystem
	// "compact".
	Logger *slog.Logger
	// MaxInflightBytes bounds the batch bytes fetched ahead of the replay
	// (default DefaultMaxInflightBytes); a pass holds about twice this in
	// memory at most, whatever the database's size (restore.Options).
	MaxInflightBytes int64
	// Grace is how old a chunk that no manifest names must be before the
	// pass deletes it (default DefaultGrace; see collect.go). It protects
	// the chunks a writer uploads before the manifest naming them lands,
	// so it must exceed the longest such upload plus the skew between our
	// clock (Now) and the bucket's.
	Grace time.Duration
	// Owner, set by the writer of the session own.json names (package
	// session), makes the pass its owner's: it collects the chunks the owner
	// put itself once nothing names them, without the grace, and reads
	// each manifest once across the owner's passes (owner.go). The same
	// Owner goes to every pass of the session.
	Owner *Owner
	// Live lets a pass that is not the owner's write a snapshot of a
	// session that may still have a writer (own.json held, or released
	// without its end). Without it such a pass deletes and collects but
	// writes no snapshot (Result.SnapshotSkipped): the owner collects the
	// chunks its own manifests no longer name at once, and a snapshot
	// built beside it on its older manifest may name them (owner.go). Set
	// it only when the writer is known dead.
	Live bool
	// Force writes a snapshot whenever the current session has batches
	// after its newest snapshot, even if the size rule does not ask for one
	// (framectl compact --force, benchmarks).
	Force bool

	baseLogger *slog.Logger // Logger without the subsystem, for restore
	fullReplay bool         // load a manifest base whole (tests compare the two builds)
}

// DefaultMaxInflightBytes keeps a background pass light beside the
// database it compacts: a quarter of restore's default, which is sized for
// an operator's restore running alone.
const DefaultMaxInflightBytes = 16 << 20

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Compression == 0 {
		o.Compression = frames.DefaultLevel
	}
	if o.ScratchDir == "" {
		o.ScratchDir = os.TempDir()
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.baseLogger = o.Logger
	o.Logger = o.Logger.With(logattr.Subsystem, logattr.SubsystemCompact)
	return o
}

// Result reports one pass over one actor.
type Result struct {
	Actor frames.Actor
	// Epoch is the current session the pass worked on: own.json's epoch,
	// or without own.json the newest session that has a snapshot. 0 when
	// the actor has neither (nothing to do).
	Epoch frames.Epoch
	// RuleLogBytes and RuleDBBytes are the size rule's inputs as the pass
	// found them (see Due); Due is its answer.
	RuleLogBytes, RuleDBBytes int64
	Due                       bool
	// Snapshot is the key of the snapshot written, "" if none; Seq the
	// sequence number it covers through.
	Snapshot string
	Seq      frames.Seq
	// LeftLogBytes and LeftDBBytes are the rule's inputs after the pass, as
	// of its listing: the log past the current session's newest snapshot
	// (0 after a snapshot was written) and the database size at that
	// snapshot. Trigger.Done starts from them.
	LeftLogBytes, LeftDBBytes int64
	// BytesRead is what the pass downloaded (object bytes, compressed),
	// BytesWritten what it uploaded.
	BytesRead, BytesWritten int64
	// Deleted lists the keys deleted, snapshots first. Retained counts the
	// covered or superseded objects kept for the retention window.
	Deleted  []string
	Retained int
	// ChunksDeleted and ChunkBytesDeleted count the chunk objects the pass
	// collected: named by no snapshot it listed, older than the grace.
	// ChunksKeptByGrace counts the chunks no snapshot names that it kept
	// because they are younger than the grace (or were uploaded again
	// since the listing): uploaded for a manifest that may be in flight.
	// CollectSkipped says why the pass collected nothing although it
	// might have ("" otherwise): a snapshot it could not read, or a claim
	// that began during the pass.
	// ChunksOwned counts the chunks among ChunksDeleted that the owner
	// put itself and collected without the grace (Options.Owner); they
	// are counted as deleted once their DeleteMany succeeded, gone before
	// or not.
	ChunksDeleted     int
	ChunkBytesDeleted int64
	ChunksKeptByGrace int
	ChunksOwned       int
	CollectSkipped    string
	// SnapshotSkipped says why a snapshot the rule asked for was not
	// written: the session may still have a writer and the pass is not
	// its owner's (see Options.Live).
	SnapshotSkipped string
	// Retention is the window the pass applied: Options.Retention, or the
	// longer one own.json records (RetentionRecorded).
	Retention         time.Duration
	RetentionRecorded bool
	// Attempts is 1, or more when objects vanished while the pass read
	// them and it started over.
	Attempts int
	Duration time.Duration
}
