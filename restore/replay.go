package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/lanes"
)

// Replayed is a plan replayed into scratch files and verified: every
// object read to its end with its trailer and seal checked, the checksum
// chain checked frame by frame, the files checked against the final
// checksums (lanes.Set.VerifyFiles), and, unless skipped, the database
// through PRAGMA integrity_check.
type Replayed struct {
	// Set holds the state, at Seq. The caller may read its files, write
	// it out as a snapshot (Set.WriteSnapshot) or move its main lane's file
	// away; Close closes it and removes Dir.
	Set *lanes.Set
	// Dir is the scratch directory holding the Set's files.
	Dir  string
	Plan Plan
	// Manifest is the plan's snapshot when it is a manifest (its chunks
	// loaded and verified, or with Lazy the ones touched), nil when it is
	// a full snapshot.
	Manifest *frames.Manifest
	// Lazy is set when the Set was loaded lazily (Options.LazyChunks): its
	// files hold the manifest's chunks the frames touched, not the others.
	Lazy bool
	// Seq and CommitTime (Unix nanoseconds; 0 when the snapshot carried
	// none and no frame was applied) describe the state reached.
	Seq        frames.Seq
	CommitTime int64
	// Applied lists the snapshot and then every batch of which at least
	// one frame was applied, in order.
	Applied []Object
	// Skipped lists the batches of the plan not applied because the state
	// already covered them, or because a later, wider batch covered them.
	Skipped []Object
	// ObjectsFetched and BytesFetched count GETs that returned a body and
	// the compressed bytes read (header probes included).
	ObjectsFetched int
	BytesFetched   int64
	// OutOfRange is set when the target was outside the session and
	// OrNearest asked for the nearest state instead (see Target).
	OutOfRange *TargetError
}

// Close closes the Set and removes the scratch directory with everything
// left in it.
func (r *Replayed) Close() error {
	err := r.Set.Close()
	if rerr := os.RemoveAll(r.Dir); err == nil {
		err = rerr
	}
	return err
}

// Replay rebuilds the state a plan leads to in a new directory under
// scratchDir, and verifies it (see Replayed). It fetches batches in
// parallel and applies them strictly in order; the snapshot streams from
// the bucket into the files, so memory does not grow with the database.
//
// A batch ending at or before the state reached is skipped unread. A batch
// starting past the next sequence number is skipped only if a later batch
// of the plan starts early enough to cover it; otherwise the replay fails
// with a *lanes.GapError (lanes.ErrGap) naming the missing sequence
// numbers, inside an *Error naming the session and the batch after the
// gap.
//
// A 404 (an object deleted since the listing, by compaction) is returned
// as an error matching bucket.ErrNotFound: plan again from a fresh listing
// (Restore does; a compaction pass starts over). On any error nothing is
// left in scratchDir.
func Replay(ctx context.Context, b bucket.Bucket, plan Plan, scratchDir string, opts Options) (*Replayed, error) {
	return replay(ctx, b, plan, scratchDir, opts.withDefaults(), nil)
}

// replayHooks let Verify watch a replay, and Restore ask more of it.
type replayHooks struct {
	// writeBack, for Restore, which syncs the files it renames: the main
	// lane's file is synced while it is verified, so that its pages go to
	// the disk during the checks rather than after them.
	writeBack bool
	// hashChunks, for Verify, which counts the chunks the replay loaded
	// as checked: they are read with their content's SHA-256 recomputed
	// (chunks.Options.HashContent).
	hashChunks bool
	// onFrame is called after every whole frame applied.
	onFrame func(set *lanes.Set)
	// onObject is called for every object read to its verified end, with
	// its header when it is a batch.
	onObject func(o Object, hdr *frames.BatchHeader)
	// onManifest is called when the snapshot is a manifest whose chunks
	// all loaded and verified, with what loading them read.
	onManifest func(key string, m *frames.Manifest, loaded chunks.Loaded)
}

// replayer is one replay of a plan.
type replayer struct {
	b       bucket.Bucket
	plan    Plan
	opts    Options
	hooks   *replayHooks
	set     *lanes.Set
	res     *Replayed
	fetch   *fetcher
	headers map[int]frames.BatchHeader // looked ahead at, by plan index
	stopped bool                       // a frame past the target was seen
	refused *mark                      // the first frame past the target
	done    int                        // objects applied or skipped
	extra   struct {                   // fetches outside the fetcher
		objects int
		bytes   int64
	}
}

// mark is a frame boundary: the sequence number a frame ends at and its
// commit time.
type mark struct {
	seq        frames.Seq
	commitTime int64
}

func replay(ctx context.Context, b bucket.Bucket, plan Plan, scratchDir string, opts Options, hooks *replayHooks) (*Replayed, error) {
	if hooks == nil {
		hooks = &replayHooks{}
	}
	if err := plan.check(); err != nil {
		return nil, &Error{Op: "replay", Actor: plan.Actor.Prefix(), Epoch: plan.Epoch, Err: err}
	}
	dir, err := os.MkdirTemp(scratchDir, scratchPrefix)
	if err != nil {
		return nil, &Error{Op: "replay", Actor: plan.Actor.Prefix(), Epoch: plan.Epoch, Err: err}
	}
	r := &replayer{b: b, plan: plan, opts: opts, hooks: hooks, res: &Replayed{Dir: dir, Plan: plan}, headers: map[int]frames.BatchHeader{}}
	if err := r.run(ctx, dir); err != nil {
		if r.set != nil {
			r.set.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	return r.res, nil
}

func (r *replayer) fail(key string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: "replay", Actor: r.plan.Actor.Prefix(), Epoch: r.plan.Epoch, Key: key, Err: err}
}

func (r *replayer) progress(phase Phase, key string) {
	if r.opts.Progress == nil {
		return
	}
	var seq frames.Seq
	if r.set != nil {
		seq = r.set.Seq()
	}
	var fetched int64
	if r.fetch != nil {
		fetched = r.fetch.bytes.Load()
	}
	r.opts.Progress(Progress{Actor: r.plan.Actor, Phase: phase, Key: key, ObjectsDone: r.done,
		ObjectsTotal: 1 + len(r.plan.Batches), BytesFetched: fetched + r.extra.bytes, Seq: seq})
}

func (r *replayer) run(ctx context.Context, dir string) error {
	start := time.Now()
	log := r.opts.Logger.With(logattr.Actor, r.plan.Actor.Prefix(), logattr.Epoch, r.plan.Epoch)
	defer func() {
		if r.fetch != nil {
			r.fetch.close()
		}
	}()

	r.progress(PhaseSnapshot, r.plan.Snapshot.Key)
	if err := r.loadSnapshot(ctx, dir); err != nil {
		return err
	}
	r.done++
	r.res.Applied = append(r.res.Applied, r.plan.Snapshot)
	r.hooks.object(r.plan.Snapshot, nil)
	log.Debug("snapshot loaded", logattr.Key, r.plan.Snapshot.Key, logattr.Seq, r.set.Seq())

	for i, o := range r.plan.Batches {
		if r.stopped || r.plan.Target.reached(r.set.Seq()) {
			break
		}
		if err := r.batch(ctx, i, o); err != nil {
			return err
		}
		r.done++
		r.progress(PhaseBatches, o.Key)
	}
	r.fetch.close()

	if seq := r.set.Seq(); seq < r.plan.EndSeq && !r.stopped {
		if n, isSeq := r.plan.Target.Seq(); !isSeq || n > seq {
			key := r.plan.Actor.OwnKey()
			if r.plan.ContinuedBy != 0 {
				key = r.plan.ContinuedKey
			}
			return r.fail(key, &TailError{Key: key, Epoch: r.plan.Epoch, ReachedSeq: seq, EndSeq: r.plan.EndSeq, ContinuedBy: r.plan.ContinuedBy})
		}
	}
	r.res.OutOfRange = r.plan.OutOfRange
	if r.plan.Target.kind == targetTime && r.set.Seq() == r.plan.Snapshot.Seq && unknownTime(r.set.CommitTime()) {
		// The snapshot's state was committed at some time before the
		// first frame after it, and the target is before that frame:
		// nothing says the state existed yet at the target.
		e := &TargetError{Target: r.plan.Target, Epoch: r.plan.Epoch, FirstSeq: r.plan.Snapshot.Seq, LastSeq: r.plan.Snapshot.Seq}
		if n := len(r.plan.Batches); n > 0 {
			e.LastSeq = r.plan.Batches[n-1].Seq
		}
		if r.refused != nil {
			e.EarliestSeq, e.EarliestTime = r.refused.seq, time.Unix(0, r.refused.commitTime)
		}
		if !r.plan.Target.nearest {
			return r.fail(r.plan.Snapshot.Key, e)
		}
		r.res.OutOfRange = e
	}
	if err := r.verify(ctx); err != nil {
		return err
	}
	res := r.res
	res.Set, res.Seq, res.CommitTime = r.set, r.set.Seq(), r.set.CommitTime()
	res.ObjectsFetched = int(r.fetch.objects.Load()) + r.extra.objects
	res.BytesFetched = r.fetch.bytes.Load() + r.extra.bytes
	log.Debug("replayed", logattr.Seq, res.Seq, "applied", len(res.Applied), "skipped", len(res.Skipped),
		"bytes", res.BytesFetched, logattr.Duration, time.Since(start))
	return nil
}

// verify checks the files against the checksums the replay tracked and,
// unless skipped, runs integrity_check on the main lane. Both only read
// the files, and each is about one pass over the database, so they run
// side by side: a restore waits for the slower one only.
func (r *replayer) verify(ctx context.Context) error {
	r.progress(PhaseVerify, "")
	main, ok := r.set.Lane(lanes.MainLane)
	if !ok {
		return r.fail("", fmt.Errorf("%w: the state has no main lane (lane %d)", lanes.ErrCorrupt, lanes.MainLane))
	}
	integrity := make(chan error, 1)
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.opts.SkipIntegrityCheck {
		integrity <- nil
	} else {
		r.progress(PhaseIntegrity, "")
		go func() { integrity <- IntegrityCheck(ictx, main.Path) }()
	}
	written := make(chan error, 1)
	if r.hooks.writeBack {
		go func() { written <- syncFile(main.Path) }()
	} else {
		written <- nil
	}
	ferr := r.set.VerifyFiles(ctx)
	if ferr != nil {
		cancel() // the files are wrong: their integrity does not matter
	}
	ierr := <-integrity
	// A failed sync is a failed restore, whatever the checks say: the
	// kernel may have dropped the pages it could not write, and a later
	// sync would not say so.
	if werr := <-written; werr != nil && ferr == nil && ierr == nil {
		return r.fail("", werr)
	}
	// A file that does not hold what the chain says explains any
	// integrity failure: report the checksum.
	if ferr != nil {
		return r.fail("", ferr)
	}
	if ierr != nil {
		return r.fail("", ierr)
	}
	return nil
}

// syncFile syncs the file at path through a descriptor of its own.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// loadSnapshot loads the plan's snapshot into a new Set and starts the
// fetcher of the batches. A full snapshot streams from the bucket into the
// files while the batches are fetched ahead; a manifest's chunks are
// fetched first, within the budget, and the batches after them, so that
// the two never hold the budget twice over.
func (r *replayer) loadSnapshot(ctx context.Context, dir string) error {
	key := r.plan.Snapshot.Key
	rc, _, err := r.b.Get(ctx, key)
	if err != nil {
		return r.fail(key, err)
	}
	closeBody := sync.OnceFunc(func() { rc.Close() })
	defer closeBody()
	r.extra.objects++
	cr := iocount.NewReader(rc, nil)
	defer func() { r.extra.bytes += cr.Count() }()
	sr, m, err := frames.OpenSnapshot(cr, key, r.opts.Limits)
	if err != nil {
		return r.fail(key, err)
	}
	if m != nil && r.opts.LazyChunks && r.opts.SkipIntegrityCheck {
		closeBody()
		set, err := chunks.OpenLazy(key, m, dir)
		switch {
		case err == nil:
			r.set, r.res.Manifest, r.res.Lazy = set, m, true
			r.fetch = newFetcher(ctx, r.b, r.plan.Batches, r.opts)
			return nil
		case !errors.Is(err, lanes.ErrNotLazy):
			return r.fail(key, err)
		}
		r.opts.Logger.Debug("manifest loaded whole", logattr.Key, key, logattr.Err, err)
	}
	if m != nil {
		closeBody() // read whole: nothing more to come
		set, loaded, err := chunks.Load(ctx, r.b, r.plan.Actor, key, m, dir,
			chunks.Options{MaxInflightBytes: r.opts.MaxInflightBytes, Limits: r.opts.Limits, HashContent: r.hooks.hashChunks})
		r.extra.objects += loaded.Chunks
		r.extra.bytes += loaded.Bytes
		if err != nil {
			return r.fail(key, err)
		}
		r.set, r.res.Manifest = set, m
		if r.hooks.onManifest != nil {
			r.hooks.onManifest(key, m, loaded)
		}
		r.fetch = newFetcher(ctx, r.b, r.plan.Batches, r.opts)
		return nil
	}
	r.fetch = newFetcher(ctx, r.b, r.plan.Batches, r.opts)
	set, err := lanes.LoadSnapshot(ctx, dir, sr, key)
	if err != nil {
		return r.fail(key, err)
	}
	r.set = set
	return nil
}

// batch applies (or skips) batch i of the plan.
func (r *replayer) batch(ctx context.Context, i int, o Object) error {
	seq := r.set.Seq()
	if o.Seq <= seq {
		r.fetch.skip(i)
		r.res.Skipped = append(r.res.Skipped, o)
		return nil
	}
	s := r.fetch.open(i)
	it := s.next(ctx)
	if it.err != nil {
		return r.fail(o.Key, it.err)
	}
	hdr := it.hdr
	if hdr.FirstSeq > seq+1 {
		covered, err := r.coveredLater(ctx, i, seq)
		if err != nil {
			return err
		}
		if !covered {
			return r.fail(o.Key, &lanes.GapError{From: seq + 1, To: hdr.FirstSeq - 1})
		}
		r.fetch.skip(i)
		r.res.Skipped = append(r.res.Skipped, o)
		return nil
	}
	before := r.set.Stats().Frames
	for {
		it := s.next(ctx)
		if it.err != nil {
			return r.fail(o.Key, it.err)
		}
		if it.eof {
			break
		}
		f := it.frame
		switch {
		case f.LastSeq <= r.set.Seq():
			// Covered already: Apply skips it, and the target does not
			// apply to a frame that changes nothing. (The parts of a frame
			// being applied share its LastSeq, past Seq until the last
			// part: a part never lands here halfway through a frame.)
		case r.stopped || !r.plan.Target.admitsFrame(f):
			// Past the target: read the rest of the batch only to verify
			// what was applied from it.
			if !r.stopped {
				r.refused = &mark{f.LastSeq, f.CommitTime}
			}
			r.stopped = true
			r.fetch.release(s, it)
			continue
		}
		if r.res.Lazy {
			loaded, err := chunks.Touch(ctx, r.b, r.plan.Actor, r.plan.Snapshot.Key, r.res.Manifest, r.set, f,
				chunks.Options{MaxInflightBytes: r.opts.MaxInflightBytes, Limits: r.opts.Limits, HashContent: r.hooks.hashChunks})
			r.extra.objects += loaded.Chunks
			r.extra.bytes += loaded.Bytes
			if err != nil {
				return r.fail(r.plan.Snapshot.Key, err)
			}
		}
		if err := r.set.Apply(f); err != nil {
			return r.fail(o.Key, err)
		}
		if !(f.Kind == frames.KindSQLitePages && f.SQLite.Continued) {
			r.hooks.frame(r.set)
		}
		r.fetch.release(s, it)
	}
	r.hooks.object(o, hdr)
	if r.set.Stats().Frames > before {
		r.res.Applied = append(r.res.Applied, o)
	} else {
		r.res.Skipped = append(r.res.Skipped, o)
	}
	return nil
}

// coveredLater reports whether a batch after plan index i starts at or
// before seq+1: then it covers batch i, which starts past seq+1, and the
// frames in between are not missing. Only headers are read, and only on
// this path, which a healthy log takes rarely (a batch uploaded twice
// with different ranges after a lost response).
func (r *replayer) coveredLater(ctx context.Context, i int, seq frames.Seq) (bool, error) {
	for j := i + 1; j < len(r.plan.Batches); j++ {
		hdr, ok := r.headers[j]
		if !ok {
			o := r.plan.Batches[j]
			h, err := batchHeader(ctx, r.b, o.Key, r.opts.Limits)
			if err != nil {
				return false, r.fail(o.Key, err)
			}
			r.extra.objects++
			hdr, r.headers[j] = h, h
		}
		if hdr.FirstSeq <= seq+1 {
			return true, nil
		}
	}
	return false, nil
}

func (h *replayHooks) frame(set *lanes.Set) {
	if h.onFrame != nil {
		h.onFrame(set)
	}
}

func (h *replayHooks) object(o Object, hdr *frames.BatchHeader) {
	if h.onObject != nil {
		h.onObject(o, hdr)
	}
}

func report(opts Options, p Progress) {
	if opts.Progress != nil {
		opts.Progress(p)
	}
}
