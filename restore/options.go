package restore

import (
	"log/slog"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// Options tune Restore, RestoreNamespace and Replay. The zero value
// restores the latest state with the defaults.
type Options struct {
	// Target is the state to restore (default Latest). Replay ignores it:
	// the plan carries its target.
	Target Target
	// Parallelism is how many batches are downloaded and decoded ahead of
	// the replay (default DefaultParallelism).
	Parallelism int
	// MaxInflightBytes bounds the bytes downloaded or decoded ahead of the
	// replay (default DefaultMaxInflightBytes). See fetch.go: memory stays
	// within about twice this plus one frame message, whatever the size of
	// the database.
	MaxInflightBytes int64
	// Limits bound the decoding of every object (zero fields: defaults).
	Limits frames.Limits
	// MaxReplans bounds how often a restore starts over from a fresh
	// listing because an object it planned to read was deleted under it
	// (compaction raced it). Default DefaultMaxReplans; a negative value
	// means never re-plan. Replay ignores it: it replays the plan it is
	// given, and its caller plans again.
	MaxReplans int
	// Actors bounds how many actors RestoreNamespace restores at once
	// (default DefaultActors).
	Actors int
	// SkipIntegrityCheck leaves out PRAGMA integrity_check of the result.
	// Every page still verified against the checksum chain; the check
	// guards against what the chain cannot see (a capture that recorded
	// wrong pages). For benchmarks that measure it apart, and for callers
	// that run it themselves; restore by an operator keeps it.
	SkipIntegrityCheck bool
	// LazyChunks, for Replay with SkipIntegrityCheck, loads a manifest's
	// chunks on first touch (chunks.OpenLazy, chunks.Touch): only the
	// chunks the frames write into, or a truncation or growth changes, are
	// fetched, each verified as a whole load verifies it. The Set's files
	// then hold only those chunks and the pages written (Replayed.Lazy):
	// it can be written out only as a manifest by chunks.Write with
	// Replayed.Manifest as Options.Prior, which names the others unread.
	// For compaction. The chunks a frame touches are fetched before it is
	// applied, within MaxInflightBytes beside the batches fetched ahead. A
	// full snapshot, or a manifest a lazy Set cannot start from
	// (lanes.ErrNotLazy), is loaded whole.
	LazyChunks bool
	// Logger receives progress and re-plans (nil: discard).
	Logger *slog.Logger
	// Progress, if set, is called after each object applied and at each
	// phase. RestoreNamespace calls it from several goroutines at once.
	Progress func(Progress)
}

// Defaults for Options' zero fields.
const (
	DefaultParallelism      = 4
	DefaultMaxInflightBytes = 64 << 20
	DefaultMaxReplans       = 5
	DefaultActors           = 4
)

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	switch {
	case o.MaxReplans == 0:
		o.MaxReplans = DefaultMaxReplans
	case o.MaxReplans < 0:
		o.MaxReplans = 0
	}
	if o.Actors <= 0 {
		o.Actors = DefaultActors
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With(logattr.Subsystem, logattr.SubsystemRestore)
	return o
}

// Progress reports how far a restore or verification is.
type Progress struct {
	Actor frames.Actor
	Phase Phase
	// Key is the object just applied or checked ("" between objects).
	Key string
	// ObjectsDone of ObjectsTotal objects of the plan (snapshot included)
	// are applied or skipped.
	ObjectsDone, ObjectsTotal int
	// BytesFetched is the compressed bytes read from the bucket so far.
	BytesFetched int64
	// Seq is the sequence number the state has reached.
	Seq frames.Seq
}

// Phase is a step of a restore.
type Phase string

const (
	PhasePlan      Phase = "plan"      // listing, reading own.json, choosing
	PhaseSnapshot  Phase = "snapshot"  // loading the snapshot
	PhaseBatches   Phase = "batches"   // applying batches
	PhaseVerify    Phase = "verify"    // checking the files against the checksums
	PhaseIntegrity Phase = "integrity" // PRAGMA integrity_check
	PhaseDone      Phase = "done"
)
