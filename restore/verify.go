package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/lanes"
)

// Verification reads everything a bucket holds for an actor and reports
// what is wrong with it, object by object. What counts as damage (the
// bucket cannot give back what was acknowledged, or cannot be trusted to)
// and what is a warning (the bucket is sound but untidy) is below; an error
// met while reading is damage exactly when it matches frames.ErrDamage,
// and its kind only words the problem (classify):
//
//	kind       severity  found when
//	corrupt    damage    an object does not decode to its verified end
//	                     (bad header, gzip or seal checksum, trailing
//	                     bytes, a frame that cannot apply, too large)
//	truncated  damage    an object ends early
//	checksum   damage    the checksum chain breaks while replaying, the
//	                     replayed files do not match the final checksums,
//	                     or a snapshot disagrees with the chain at its seq
//	integrity  damage    the replayed current session fails integrity_check
//	gap        damage    frames of the current session are missing after a
//	                     snapshot and no later snapshot covers them, or a
//	                     session newer than the current one holds batches
//	                     but no snapshot
//	gap        warning   frames are missing but a later snapshot covers
//	                     them (point-in-time restore between is impossible),
//	                     or frames of a superseded session are missing
//	own        damage    own.json does not parse, is not the bytes fence
//	                     writes for the record it holds, names an epoch
//	                     older than a session in the bucket, names a
//	                     node whose lease disagrees on the address, or
//	                     is held by a node with a lease at an epoch with
//	                     no objects
//	own        warning   the actor has no own.json (written without fence);
//	                     it is released at an epoch with no objects (a
//	                     claim whose open failed before its first
//	                     snapshot); its holder has no lease (swept, or
//	                     deregistered without releasing)
//	missing    damage    a chunk a manifest names does not exist (the
//	                     problem names the chunk; its message, the
//	                     manifests that name it)
//	stray      warning   objects of superseded sessions awaiting the tier
//	                     pass or kept for retention, chunks no manifest
//	                     names older than VerifyOptions.ChunkGrace (no
//	                     compaction pass collected them), and keys under
//	                     the actor that framectl does not write
//
// A chunk no manifest names that is younger than the grace is no problem:
// it is what a working writer leaves at any moment, uploaded for a
// manifest still in flight (chunks are stored before the manifest that
// names them) or named only by a manifest a compaction pass deleted, which
// a later pass collects (the pass that deletes a manifest keeps its chunks,
// package compact's rule 1), and no collector may delete it yet
// (compact.Options.Grace). Verify cannot tell the two apart and does not
// need to: Report.ChunksWithinGrace counts them.
//
// A manifest's chunks are read and checked like any object: each against
// its key's hash and the size its manifest gives it. A damaged or missing
// chunk is damage named by the chunk's key, its message naming the
// manifests that need it; those manifests then count as damaged too (no
// later snapshot is taken to cover a gap through them).
//
// Damaged objects are named once: a gap that a damaged batch may fill and
// a replay that stops at a damaged object add nothing to the report.
//
// The last batch of a session cannot be told missing from a log that ends
// earlier: nothing records where a session ended but its own batches.

// Severity says whether a problem is damage or a warning.
type Severity uint8

const (
	Warning Severity = iota + 1
	Damage
)

func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Damage:
		return "damage"
	}
	return fmt.Sprintf("Severity(%d)", uint8(s))
}

// Kind is what is wrong.
type Kind string

const (
	KindCorrupt   Kind = "corrupt"
	KindTruncated Kind = "truncated"
	KindGap       Kind = "gap"
	KindChecksum  Kind = "checksum"
	KindIntegrity Kind = "integrity"
	KindStray     Kind = "stray"
	KindOwn       Kind = "own"
	KindMissing   Kind = "missing"
)

// Problem is one thing wrong with one object.
type Problem struct {
	// Key is the object concerned. For a gap it is the batch that starts
	// after the missing frames (or the session's first object when the
	// session has no snapshot).
	Key      string
	Kind     Kind
	Severity Severity
	Epoch    frames.Epoch // the session's; 0 for own.json and keys framectl does not write
	// From and To are the missing sequence numbers of a gap (inclusive).
	From, To frames.Seq
	Message  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s %s: %s", p.Severity, p.Kind, p.Key, p.Message)
}

// Report is what Verify found for one actor.
type Report struct {
	Actor frames.Actor
	// Own is own.json as parsed (nil when absent or damaged).
	Own *fence.Record
	// Epoch is the current session (the one Restore would choose; 0 when
	// none has a snapshot), Seq the sequence number its replay reached.
	Epoch frames.Epoch
	Seq   frames.Seq
	// Objects is the number of objects read, Bytes their compressed bytes.
	Objects  int
	Bytes    int64
	Problems []Problem
	// ChunksWithinGrace counts the chunks no manifest names that are
	// younger than VerifyOptions.ChunkGrace (or listed without a
	// modification time): information, not a problem (see above).
	ChunksWithinGrace int
	Duration          time.Duration
}

// Damaged reports whether any problem is damage.
func (r *Report) Damaged() bool {
	for _, p := range r.Problems {
		if p.Severity == Damage {
			return true
		}
	}
	return false
}

// ErrDamage matches Report.Err: verification found damage. It matches
// frames.ErrDamage, as all damage does.
var ErrDamage = frames.NewDamage("damage found")

// Err returns nil when the report has no damage, else an error matching
// ErrDamage that lists every damaged object.
func (r *Report) Err() error {
	var lines []string
	for _, p := range r.Problems {
		if p.Severity == Damage {
			lines = append(lines, p.String())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("restore: verify %s: %w: %s", r.Actor.Prefix(), ErrDamage, strings.Join(lines, "; "))
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Parallelism is how many objects are read at once (default
	// DefaultParallelism).
	Parallelism int
	// MaxInflightBytes bounds the replay's read-ahead (see Options).
	MaxInflightBytes int64
	// Limits bound decoding.
	Limits frames.Limits
	// ScratchDir holds the replay of the current session (default: the
	// system's temporary directory). It needs room for one database.
	ScratchDir string
	// MaxReplans bounds how often verification of an actor starts over
	// because objects vanished under it (see Options.MaxReplans).
	MaxReplans int
	// Actors bounds how many actors VerifyNamespace and VerifyPrefix check
	// at once (default DefaultActors).
	Actors int
	Logger *slog.Logger
	// Progress, if set, is called for every object checked, from several
	// goroutines at once.
	Progress func(Progress)
	// ChunkGrace is the age, by the modification time the listing gives
	// against Now read before it, from which a chunk no manifest names is a
	// warning; a younger one is counted in Report.ChunksWithinGrace. Give
	// the collector's grace (compact.DefaultGrace, framectl compact
	// --grace): younger, compaction keeps it too. 0: every chunk no
	// manifest names is a warning, whatever its age.
	ChunkGrace time.Duration
	// Now is the clock ChunkGrace is measured on (default time.Now).
	Now func() time.Time
}

func (o VerifyOptions) replayOptions() Options {
	ro := Options{Parallelism: o.Parallelism, MaxInflightBytes: o.MaxInflightBytes, Limits: o.Limits,
		MaxReplans: o.MaxReplans, Actors: o.Actors, Logger: o.Logger}
	return ro.withDefaults()
}

// Verify checks everything the bucket holds for actor a: every object of
// every session read to its verified end, the current session replayed
// from its snapshots with the checksum chain and the final checksums
// checked and integrity_check run on the result, the chain searched for
// gaps, own.json checked against the bucket, stray objects listed. See the
// table above for what is damage.
//
// The error is only for what stops verification: the bucket cannot be
// read (network, permissions), ctx ends, or objects kept vanishing.
// Damage is in the Report.
func Verify(ctx context.Context, b bucket.Bucket, a frames.Actor, opts VerifyOptions) (Report, error) {
	start := time.Now()
	ro := opts.replayOptions()
	if !a.Valid() {
		return Report{}, &Error{Op: "verify", Actor: a.Prefix(), Err: fmt.Errorf("invalid actor %+v", a)}
	}
	scratch := opts.ScratchDir
	if scratch == "" {
		scratch = os.TempDir()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	var last error
	for attempt := 0; attempt <= ro.MaxReplans; attempt++ {
		v := &verifier{b: b, a: a, opts: ro, progress: opts.Progress, scratch: scratch, chunkGrace: opts.ChunkGrace, now: now,
			rep: Report{Actor: a}, reported: map[string]bool{}, verified: map[string]bool{},
			batchHdr: map[string]frames.BatchHeader{}, snapHdr: map[string]frames.Snapshot{},
			chain: map[frames.Seq][]lanes.Lane{}, manifests: map[string]*frames.Manifest{},
			chunkOK: map[chunkUse]bool{}, unloadable: map[string]bool{}}
		err := v.run(ctx)
		if err == nil {
			slices.SortStableFunc(v.rep.Problems, func(x, y Problem) int {
				return cmp.Or(cmp.Compare(x.Key, y.Key), cmp.Compare(x.Kind, y.Kind))
			})
			v.rep.Duration = time.Since(start)
			return v.rep, nil
		}
		if !errors.Is(err, bucket.ErrNotFound) || ctx.Err() != nil {
			return Report{}, &Error{Op: "verify", Actor: a.Prefix(), Err: err}
		}
		ro.Logger.Info("an object vanished: verifying again", logattr.Actor, a.Prefix(), logattr.Attempt, attempt+1, logattr.Err, err)
		last = err
	}
	return Report{}, &Error{Op: "verify", Actor: a.Prefix(), Err: fmt.Errorf("%w: last: %w", ErrReplans, last)}
}

// verifier is one verification of one actor.
type verifier struct {
	b        bucket.Bucket
	a        frames.Actor
	opts     Options
	progress func(Progress)
	scratch  string
	// chunkGrace is VerifyOptions.ChunkGrace; listedAt, now's reading
	// before the listing.
	chunkGrace time.Duration
	now        func() time.Time
	listedAt   time.Time
	inv        *Inventory
	rep        Report

	mu       sync.Mutex
	reported map[string]bool // keys with a damage problem already
	verified map[string]bool // objects read to their verified end
	batchHdr map[string]frames.BatchHeader
	snapHdr  map[string]frames.Snapshot
	chain    map[frames.Seq][]lanes.Lane // lanes of the replayed state at each frame boundary
	// manifests read to their verified end, by key; chunkOK the chunks
	// read and checked at a size; unloadable the manifests a damaged or
	// missing chunk makes impossible to load.
	manifests  map[string]*frames.Manifest
	chunkOK    map[chunkUse]bool
	unloadable map[string]bool
}

func (v *verifier) add(p Problem) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p.Severity == Damage && p.Kind != KindGap {
		if v.reported[p.Key] {
			return
		}
		v.reported[p.Key] = true
	}
	v.rep.Problems = append(v.rep.Problems, p)
}

func (v *verifier) damaged(key string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reported[key] || v.unloadable[key]
}

func (v *verifier) run(ctx context.Context) error {
	// Before the listing, as a collector reads its clock: a chunk judged
	// old here was old before anything the listing missed was uploaded.
	v.listedAt = v.now()
	inv, err := Take(ctx, v.b, v.a)
	if err != nil {
		return err
	}
	v.inv = inv
	own, err := v.checkOwn(ctx)
	if err != nil {
		return err
	}
	cur := v.currentSession(own)
	for _, k := range inv.Unknown {
		v.add(Problem{Key: k, Kind: KindStray, Severity: Warning, Message: "not an object framectl writes"})
	}
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		if cur != nil && s.Epoch < cur.Epoch {
			for _, o := range append(slices.Clone(s.Snapshots), s.Batches...) {
				v.add(Problem{Key: o.Key, Kind: KindStray, Severity: Warning, Epoch: s.Epoch,
					Message: fmt.Sprintf("superseded by session %d: awaiting the tier pass, or kept for point-in-time restore (retention)", cur.Epoch)})
			}
		}
	}
	if cur != nil {
		v.rep.Epoch = cur.Epoch
		if err := v.replayCurrent(ctx, cur); err != nil {
			return err
		}
	}
	if err := v.decodeRest(ctx); err != nil {
		return err
	}
	if err := v.checkChunks(ctx); err != nil {
		return err
	}
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		if cur != nil && s.Epoch < cur.Epoch {
			v.findGaps(s, Warning)
		}
	}
	if cur != nil {
		v.findGaps(cur, Damage)
		v.checkSnapshots(cur)
	}
	return nil
}

// classify maps an error to a problem kind and severity. Whether it is
// damage is frames.ErrDamage's answer alone; severity 0 means it is not
// (I/O, ctx, a vanished object: see frames.ErrDamage), and stops
// verification. The kind only words the report.
func classify(err error) (Kind, Severity) {
	if !errors.Is(err, frames.ErrDamage) {
		return "", 0
	}
	switch {
	case errors.Is(err, chunks.ErrMissing):
		return KindMissing, Damage
	case errors.Is(err, lanes.ErrGap):
		return KindGap, Damage
	case errors.Is(err, frames.ErrTruncated):
		return KindTruncated, Damage
	case errors.Is(err, lanes.ErrChecksum):
		return KindChecksum, Damage
	case errors.Is(err, ErrIntegrity):
		return KindIntegrity, Damage
	case errors.Is(err, fence.ErrBadRecord), errors.Is(err, fence.ErrBadLease):
		return KindOwn, Damage
	}
	return KindCorrupt, Damage // frames.ErrCorrupt, ErrTooLarge, ErrUnknownKind, and any other
}

// cause is an error's message without the restore prefix, for a problem
// that names its key already.
func cause(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Err.Error()
	}
	return err.Error()
}
