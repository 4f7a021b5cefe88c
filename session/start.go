package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fsync"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
)

// position is a point in an actor's history: a sequence number and the
// commit time of that commit (Unix ns; 0 when unknown, as for the empty
// database before the first commit).
type position struct {
	seq        frames.Seq
	commitTime int64
}

// sessionStart is where a new session starts: the point in the actor's
// history, the tracker of the database file when bringUpToDate already read
// it whole (nil: read it again), and what happened, for Stats.
type sessionStart struct {
	pos   position
	track *lanes.Tracker
	how   Start
	// inBucket is the epoch whose objects hold exactly the state the
	// local copy now is, at pos (reused or restored), for the state file;
	// 0 when the local copy is ahead of the bucket (kept commits) or the
	// actor is new.
	inBucket frames.Epoch
	// pred is the session's lineage, in its manifests: the session the
	// local copy continues and the seq it continues from (zero: a new
	// database).
	pred frames.Lineage
	// prior is the bucket's newest manifest (nil: none, or a full
	// snapshot): the session's first manifest uploads only chunks it does
	// not name, and names without reading them the chunks whose pages the
	// tracker fingerprints as unchanged (chunks.Options.Prior).
	prior *frames.Manifest
}

// bringUpToDate makes the file at path the state the new session starts
// from. It never replaces a local copy with an older state than the one the
// local state file says the bucket holds, and never deletes a local copy
// that may hold commits the bucket lacks:
//
//  1. The listing must show at least what the state file says was uploaded
//     (the durable record, or the in-flight batch if a Stat finds it): a
//     listing that lags is listed again for up to ListingWait, then Open
//     fails with ErrListingBehind. The bucket holding nothing for the actor
//     is a new actor: the local file, if any, is its start.
//  2. The local copy (its WAL recovered first) is current when its checksum
//     and size are those the state file recorded for the bucket's newest
//     state: it is kept, nothing is downloaded.
//  3. A local copy that is not current but equals a state the bucket holds
//     (the durable record) holds nothing more: the bucket's newest state is
//     restored over it.
//  4. Otherwise it may hold commits the bucket lacks. When it provably
//     continues the bucket's newest session (the state file's session is
//     the newest, written in this boot, and it captured at least to the
//     bucket's last seq), Config.Unacknowledged decides: keep them (the session
//     starts from the local copy) or discard them (restore over them). In
//     any other case (another owner wrote since, the machine restarted, no
//     readable state) the local copy is moved aside (Start.Diverged), then
//     the bucket's newest state is restored.
func bringUpToDate(ctx context.Context, cfg Config, l Local, a frames.Actor, path string, own *fence.Ownership) (sessionStart, error) {
	var how Start
	freed, err := restore.RemoveScratch(cfg.Dir)
	if err != nil {
		cfg.Logger.Warn("removing scratch of an interrupted restore", logattr.Err, err)
	}
	if freed > 0 {
		cfg.Logger.Warn("removed the scratch of an interrupted restore", logattr.Actor, a.Actor, "bytes", freed)
		how.ScratchBytes = freed
	}
	st, err := readState(cfg.Dir)
	if err != nil {
		cfg.Logger.Warn("ignoring an unreadable local state file; trusting checksums only", logattr.Err, err)
	}
	inv, err := restore.Take(ctx, cfg.Bucket, a)
	if err != nil {
		return sessionStart{}, err
	}
	// The object in flight when the last session stopped may have landed
	// (its PUT completes on the server after the client is gone, maybe
	// even after this Stat): a Stat that finds it makes it an expectation;
	// the listing showing it, a known state all the same.
	inflight := st.Inflight
	if inflight.valid() && !landed(ctx, cfg.Bucket, inflight.key(a)) {
		st.Inflight = stateRecord{}
	}
	if expect := newer(st.Durable, st.Inflight); expect.valid() {
		if inv, err = awaitListing(ctx, cfg, a, inv, expect, filepath.Join(cfg.Dir, stateFile)); err != nil {
			return sessionStart{}, err
		}
	}
	if !st.Inflight.valid() && inflight.valid() && listed(inv, inflight) {
		st.Inflight = inflight
	}
	if end, ok, err := releasedEnd(ctx, cfg, a, inv, own); err != nil {
		return sessionStart{}, err
	} else if ok {
		if inv, err = awaitListing(ctx, cfg, a, inv, end, a.OwnKey()); err != nil {
			return sessionStart{}, err
		}
	}
	for _, s := range inv.Sessions {
		if s.Epoch >= cfg.Epoch && (len(s.Snapshots) > 0 || len(s.Batches) > 0) {
			return sessionStart{}, fmt.Errorf("session: epoch %d is not newer than session %d already in %s for actor %s", cfg.Epoch, s.Epoch, cfg.Bucket, a.Prefix())
		}
	}
	newest, ok := inv.NewestWithSnapshot()
	if !ok {
		// A new actor, or one whose only data is local: the local state
		// (if any) is the start, its history unknown to the bucket.
		how.From = StartNew
		return sessionStart{how: how}, nil
	}
	last := newest.LastSeq()

	local, err := inspectLocal(ctx, cfg, l, path)
	if err != nil {
		return sessionStart{}, err
	}
	// The bucket's newest state, as this directory recorded it.
	var known stateRecord
	for _, r := range []stateRecord{st.Durable, st.Inflight} {
		if r.valid() && r.Epoch == newest.Epoch && r.Seq == last {
			known = r
		}
	}
	if known.valid() && local.is(known) {
		cfg.Logger.Info("local copy is current", logattr.Actor, a.Actor, logattr.Epoch, newest.Epoch, logattr.Seq, last)
		how.From = StartReused
		return sessionStart{pos: known.position(), track: local.track, how: how, inBucket: known.Epoch,
			pred: frames.Lineage{Epoch: known.Epoch, Seq: known.Seq}, prior: newestManifest(ctx, cfg, a, newest)}, nil
	}

	// Step 3 and 4: is there anything in the local copy to lose?
	holdsMore := local.exists && !local.is(st.Durable) && !local.is(st.Inflight)
	if holdsMore {
		// The local copy continues the bucket's newest session: this
		// directory wrote that session, in this boot, and nothing else
		// writes the file. It captured past the bucket's last frame, or
		// exactly to it with one commit more in the file: a kill between
		// a commit's WAL write and its captured record (commits take that
		// step one at a time, under SQLite's WAL write lock).
		continues := local.track != nil && sameBoot(st.Boot) && st.Durable.valid() &&
			newest.Epoch == st.Durable.Epoch && st.Captured >= last
		unacked := int64(1)
		if st.Captured > last {
			unacked = int64(st.Captured - last)
		}
		switch {
		case continues && cfg.Unacknowledged == KeepUnacknowledged:
			n := unacked
			cfg.Logger.Warn("keeping unacknowledged commits of the previous session", logattr.Actor, a.Actor,
				"commits", n, logattr.Epoch, st.Durable.Epoch, logattr.Seq, last, "captured", st.Captured)
			how.From, how.Kept = StartKept, n
			// The kept commits keep their sequence numbers; the session's
			// first snapshot covers them all. Their commit time is not known.
			// The session continues the bucket's newest state: the kept
			// commits were never part of the predecessor's history.
			return sessionStart{pos: position{seq: last + frames.Seq(n)}, track: local.track, how: how,
				pred: frames.Lineage{Epoch: newest.Epoch, Seq: last}, prior: newestManifest(ctx, cfg, a, newest)}, nil
		case continues:
			how.Discarded = unacked
			cfg.Logger.Warn("discarding unacknowledged commits of the previous session", logattr.Actor, a.Actor,
				"commits", how.Discarded, logattr.Epoch, st.Durable.Epoch, logattr.Seq, last, "captured", st.Captured)
		default:
			aside, err := moveAside(cfg.Dir, path)
			if err != nil {
				return sessionStart{}, err
			}
			how.Diverged = aside
			cfg.Logger.Warn("local copy may hold commits the bucket does not; moved aside before restoring",
				logattr.Actor, a.Actor, logattr.Path, aside, "newestEpoch", newest.Epoch, "newestSeq", last,
				"localEpoch", st.Durable.Epoch, "localDurable", st.Durable.Seq, "localCaptured", st.Captured,
				"sameBoot", sameBoot(st.Boot), "readable", local.track != nil)
		}
	}
	began := time.Now()
	pos, epoch, m, err := restoreOver(ctx, cfg, a, path, newest.Epoch, last)
	if f := cfg.Observer.Restore; f != nil {
		f(time.Since(began), err)
	}
	if err != nil {
		return sessionStart{}, err
	}
	how.From = StartRestored
	return sessionStart{pos: pos, how: how, inBucket: epoch,
		pred: frames.Lineage{Epoch: epoch, Seq: pos.seq}, prior: m}, nil
}

// newestManifest returns the newest snapshot of session s when it is a
// manifest: a manifest in the bucket proves its chunks stored. A full
// snapshot gives nil; a manifest that cannot be read (damaged, or
// replaced by a compaction since the listing) makes the session upload
// every chunk, which is slower and as correct.
func newestManifest(ctx context.Context, cfg Config, a frames.Actor, s *restore.Session) *frames.Manifest {
	key := s.Snapshots[len(s.Snapshots)-1].Key
	rc, _, err := cfg.Bucket.Get(ctx, key)
	if err != nil {
		cfg.Logger.Warn("cannot read the newest snapshot: the session's first one uploads every chunk", logattr.Actor, a.Actor, logattr.Key, key, logattr.Err, err)
		return nil
	}
	defer rc.Close()
	_, m, err := frames.OpenSnapshot(rc, key, frames.Limits{})
	if err != nil {
		cfg.Logger.Warn("cannot read the newest snapshot: the session's first one uploads every chunk", logattr.Actor, a.Actor, logattr.Key, key, logattr.Err, err)
		return nil
	}
	return m
}

// newer returns the later of two records (either may be absent).
func newer(a, b stateRecord) stateRecord {
	if b.Epoch > a.Epoch || (b.Epoch == a.Epoch && b.Seq > a.Seq) {
		return b
	}
	return a
}

// reaches reports whether an inventory shows at least r: a newer session
// (another owner took over since), or the newest session at or below r's
// epoch reaching r's seq (sequence numbers grow across sessions, and
// own.json's epoch may be a claim that wrote nothing).
func reaches(inv *restore.Inventory, r stateRecord) bool {
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		switch {
		case s.Epoch > r.Epoch && (len(s.Snapshots) > 0 || len(s.Batches) > 0):
			return true
		case s.Epoch <= r.Epoch && len(s.Snapshots) > 0:
			return s.LastSeq() >= r.Seq
		}
	}
	return false
}

// listed reports whether the inventory holds the object r describes.
func listed(inv *restore.Inventory, r stateRecord) bool {
	s, ok := inv.Session(r.Epoch)
	if !ok {
		return false
	}
	objs := s.Batches
	if r.Object == frames.KeySnapshot {
		objs = s.Snapshots
	}
	for _, o := range objs {
		if o.Seq == r.Seq {
			return true
		}
	}
	return false
}

// landed reports whether key exists, asked directly: where listings lag,
// a Stat of a key just written usually does not. An error counts as not
// landed: the listing check that follows is the safe side.
func landed(ctx context.Context, b bucket.Bucket, key string) bool {
	_, err := b.Stat(ctx, key)
	return err == nil
}

// releasedEnd is where the actor's last released session ended, as
// own.json recorded it at release (fence.Record.Seq): the record the claim
// replaced, or without a node own.json itself. ok is false when nothing
// recorded an end.
func releasedEnd(ctx context.Context, cfg Config, a frames.Actor, inv *restore.Inventory, own *fence.Ownership) (stateRecord, bool, error) {
	var rec fence.Record
	switch {
	case own != nil:
		rec = own.Prev
	case inv.Own != nil:
		r, _, err := fence.ReadRecord(ctx, cfg.Bucket, a)
		if errors.Is(err, bucket.ErrNotFound) {
			return stateRecord{}, false, nil
		}
		if err != nil {
			return stateRecord{}, false, fmt.Errorf("session: %w", err)
		}
		rec = r
	}
	if !rec.Released() || rec.Seq == 0 {
		return stateRecord{}, false, nil
	}
	return stateRecord{Epoch: rec.Epoch, Seq: rec.Seq}, true, nil
}

// awaitListing lists the actor again, with backoff, until the listing
// reaches expect (which source says was uploaded), for up to
// cfg.ListingWait.
func awaitListing(ctx context.Context, cfg Config, a frames.Actor, inv *restore.Inventory, expect stateRecord, source string) (*restore.Inventory, error) {
	deadline := time.Now().Add(cfg.ListingWait)
	wait := 50 * time.Millisecond
	for attempt := 1; !reaches(inv, expect); attempt++ {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s lists nothing past %s, but %s records session %d up to seq %d as uploaded (waited %v): "+
				"the listing is stale or objects were deleted (framectl verify names what is missing); the local copy is left as it is",
				ErrListingBehind, cfg.Bucket, describeNewest(inv), source, expect.Epoch, expect.Seq, cfg.ListingWait)
		}
		if attempt == 1 {
			cfg.Logger.Warn("the bucket's listing is behind the local state; listing again", logattr.Actor, a.Actor,
				logattr.Epoch, expect.Epoch, logattr.Seq, expect.Seq, "listed", describeNewest(inv))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		wait = min(2*wait, time.Second)
		next, err := restore.Take(ctx, cfg.Bucket, a)
		if err != nil {
			return nil, err
		}
		inv = next
	}
	return inv, nil
}

func describeNewest(inv *restore.Inventory) string {
	if s, ok := inv.NewestWithSnapshot(); ok {
		return fmt.Sprintf("session %d seq %d", s.Epoch, s.LastSeq())
	}
	return "no session"
}

// localCopy is the database file as Open found it.
type localCopy struct {
	exists bool
	track  *lanes.Tracker // nil when it does not exist or cannot be read
}

// is reports whether the local copy is the state r describes.
func (l localCopy) is(r stateRecord) bool {
	return l.track != nil && r.valid() && l.track.Checksum() == r.Checksum && l.track.Pages() == r.Pages
}

// inspectLocal recovers the local database's WAL (a plain SQLite open
// applies it, Local.Prepare checkpoints it) and reads the file once for
// its checksum. A file that SQLite cannot open is reported as existing but
// unreadable: never deleted, at worst moved aside.
func inspectLocal(ctx context.Context, cfg Config, l Local, path string) (localCopy, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return localCopy{}, nil
	} else if err != nil {
		return localCopy{}, fmt.Errorf("session: %w", err)
	}
	if err := l.Prepare(ctx, path, cfg.PageSize); err != nil {
		if ctx.Err() != nil {
			return localCopy{}, err
		}
		cfg.Logger.Warn("local copy is unreadable", logattr.Path, path, logattr.Err, err)
		return localCopy{exists: true}, nil
	}
	t, err := trackDatabase(ctx, l, path)
	if err != nil {
		if ctx.Err() != nil {
			return localCopy{}, err
		}
		cfg.Logger.Warn("local copy is unreadable", logattr.Path, path, logattr.Err, err)
		return localCopy{exists: true}, nil
	}
	return localCopy{exists: true, track: t}, nil
}

// moveAside renames the database file (and any WAL and shared-memory file
// beside it) to diverged-<time>.sqlite in dir, and returns the new path.
func moveAside(dir, path string) (string, error) {
	aside := filepath.Join(dir, fmt.Sprintf("diverged-%s.sqlite", time.Now().UTC().Format("20060102T150405.000000000Z")))
	for _, suffix := range []string{"-wal", "-shm", ""} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("session: moving the local copy aside: %w", err)
		}
	}
	if err := fsync.Dir(dir); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return aside, nil
}

// restoreFile is where a restore inside Open builds the database before it
// replaces the local copy.
const restoreFile = "restore.sqlite"

// restoreOver restores the bucket's newest state to a file beside path,
// checks that it reached at least seq last of session epoch (a restore
// lists again, and a lagging listing must not make it stop short of what
// Open decided on), and only then renames it over the local copy. It
// returns the state's position, the epoch of its session and the manifest
// it started from (nil: a full snapshot).
func restoreOver(ctx context.Context, cfg Config, a frames.Actor, path string, epoch frames.Epoch, last frames.Seq) (position, frames.Epoch, *frames.Manifest, error) {
	tmp := filepath.Join(cfg.Dir, restoreFile)
	if err := removeWAL(tmp); err != nil {
		return position{}, 0, nil, err
	}
	deadline := time.Now().Add(cfg.ListingWait)
	wait := 50 * time.Millisecond
	var res restore.Result
	for {
		var err error
		res, err = restore.Restore(ctx, cfg.Bucket, a, tmp, restore.Options{Logger: cfg.Logger})
		if err != nil {
			return position{}, 0, nil, fmt.Errorf("session: restoring actor %s: %w", a.Prefix(), err)
		}
		if res.Epoch > epoch || (res.Epoch == epoch && res.Seq >= last) {
			break
		}
		if time.Now().After(deadline) {
			return position{}, 0, nil, fmt.Errorf("%w: a restore of actor %s reached session %d seq %d, but the listing before it showed session %d seq %d",
				ErrListingBehind, a.Prefix(), res.Epoch, res.Seq, epoch, last)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return position{}, 0, nil, ctx.Err()
		}
		wait = min(2*wait, time.Second)
	}
	if err := removeWAL(path); err != nil {
		return position{}, 0, nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return position{}, 0, nil, fmt.Errorf("session: %w", err)
	}
	if err := fsync.Dir(cfg.Dir); err != nil {
		return position{}, 0, nil, fmt.Errorf("session: %w", err)
	}
	cfg.Logger.Info("restored from the bucket", logattr.Actor, a.Actor, logattr.Epoch, res.Epoch, logattr.Seq, res.Seq, "bytes", res.Bytes)
	var commitTime int64
	if !res.CommitTime.IsZero() {
		commitTime = res.CommitTime.UnixNano()
	}
	return position{res.Seq, commitTime}, res.Epoch, res.Manifest, nil
}

// removeWAL deletes the WAL and shared-memory files beside path: a WAL left
// beside a file that is replaced would be replayed into it by the next
// connection.
func removeWAL(path string) error {
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("session: %w", err)
		}
	}
	return nil
}
