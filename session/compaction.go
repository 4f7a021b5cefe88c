package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/internal/logattr"
)

// Compaction in the background: the replicator counts the bytes it uploads
// (compact.Trigger applies the size rule to them) and runs a compaction
// pass of its own actor when the log since the newest snapshot reaches the
// database's size, and at least Config.Compaction's minimum log, and the
// previous pass started at least its minimum interval ago (compact.Rule:
// without them a small database written fast is compacted after every
// batch). A pass reads the bucket and the copies the session keeps of its
// own uploads (kept.go), never the live database, so it never blocks a
// commit; one runs at a time; it is cancelled when replication stops.
// Each session also runs one pass as it starts, for the tier pass: it
// deletes earlier sessions, including whatever a fenced owner uploaded
// after the takeover.

// compactScratch is the directory under Config.Dir where a pass rebuilds the
// database before uploading its snapshot. It is emptied at Open: a crash
// mid-pass leaves files there.
const compactScratch = "compact"

// first is the session's first snapshot, which the session's compact.Owner
// starts from: a pass collects the chunks the owner put once nothing names
// them, without waiting out the grace.
func (r *replicator) startCompaction(dbBytes int64, first chunks.Written) error {
	if r.cfg.DisableCompaction {
		return nil
	}
	scratch := filepath.Join(r.cfg.Dir, compactScratch)
	if err := os.RemoveAll(scratch); err != nil {
		return err
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	r.trigger = r.cfg.Compaction.Trigger(dbBytes)
	owner := compact.NewOwner(r.cfg.Epoch)
	owner.Wrote(first.Key, &first.Manifest, first.Put)
	r.compactOpts = compact.Options{
		Owner:       owner,
		ScratchDir:  scratch,
		Retention:   r.cfg.Retention,
		Compression: r.cfg.Compression,
		Logger:      r.cfg.Logger,
	}
	r.compactCtx, r.compactCancel = context.WithCancel(context.Background())
	r.runCompaction(func(compact.Result, error) {}) // the session's first tier pass
	return nil
}

// uploaded tells the trigger about a batch that landed and starts a pass
// when the rule asks for one.
func (r *replicator) uploaded(n int64) {
	if r.trigger != nil && r.trigger.Uploaded(n) {
		r.runCompaction(r.trigger.Done)
	}
}

func (r *replicator) runCompaction(done func(compact.Result, error)) {
	r.compacting.Add(1)
	go func() {
		defer r.compacting.Done()
		began := time.Now()
		res, err := r.compactPass()
		done(res, err)
		r.stats.compactions.Add(1)
		if f := r.cfg.Observer.Compaction; f != nil {
			obsErr := err
			if err != nil && r.compactCtx.Err() != nil {
				obsErr = fmt.Errorf("%w (cut short: %w)", err, r.compactCtx.Err())
			}
			f(time.Since(began), obsErr)
		}
		switch {
		case err != nil && r.compactCtx.Err() == nil:
			r.stats.compactionErrors.Add(1)
			r.log.Warn("compaction pass failed", logattr.Err, err)
		case res.Snapshot != "" || len(res.Deleted) > 0:
			r.log.Info("compaction pass", "snapshot", res.Snapshot, logattr.Seq, res.Seq,
				"deleted", len(res.Deleted), "read", res.BytesRead, "written", res.BytesWritten, "took", res.Duration)
		}
	}()
}

// compactPass runs one pass, reading through the copies the session keeps
// (kept.go) when it keeps any. A pass that fails after a copy served it
// is run again from the bucket alone with every copy dropped: a damaged
// copy costs a pass's reads, never a snapshot.
func (r *replicator) compactPass() (compact.Result, error) {
	k, ok := r.cfg.Bucket.(*kept)
	if !ok {
		return compact.Actor(r.compactCtx, r.cfg.Bucket, r.actor, r.compactOpts)
	}
	served := k.served()
	res, err := compact.Actor(r.compactCtx, k, r.actor, r.compactOpts)
	if err != nil && r.compactCtx.Err() == nil && k.served() > served {
		r.log.Info("compaction pass failed reading kept copies; dropping them and reading the bucket", logattr.Err, err)
		k.clear()
		r.stats.keptFallbacks.Add(1)
		res, err = compact.Actor(r.compactCtx, k.Bucket, r.actor, r.compactOpts)
	}
	if res.Snapshot != "" {
		// Stored, even if the pass failed after (a delete, or Close
		// cancelling it): later passes start from it.
		k.compacted(res.Snapshot, r.compactOpts.Limits)
	}
	return res, err
}

// stopCompaction cancels a running pass and waits for it.
func (r *replicator) stopCompaction() {
	if r.compactCancel != nil {
		r.compactCancel()
	}
	r.compacting.Wait()
}
