package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/lanes"
)

// uploadTail makes the commits a takeover recovered from the followers
// (peers.go) the session's first batch, then the local copy's state. The
// session's first manifest, already in the bucket, is the bucket's durable
// point the tail is chained from; track is the database there.
//
// Every entry is checked as if it came from the bucket, for it came from
// the network: its body must decode as a batch of one frame of its own
// seq, chained from the one before, and applying its pages must give the
// checksum the entry claims (follow checked the chain values only, which
// it cannot recompute). A tail that fails is an error naming the entry;
// nothing of it is uploaded or written.
//
// The batch is uploaded (in flight in the state file first) before a page
// reaches the local file, so the local copy is never ahead of what the
// state file knows about the bucket; it is one object of this session's
// epoch, so a restore to any commit of the tail finds it in this session's
// log, and the predecessor's own frames past the bucket's durable point,
// if a zombie wrote any, stay outside the lineage.
func uploadTail(ctx context.Context, cfg Config, a frames.Actor, path string, track *lanes.Tracker, state *stateWriter, tail []follow.Entry) (position, error) {
	f, err := mergeTail(a, track, tail)
	if err != nil {
		return position{}, err
	}
	f.Epoch = cfg.Epoch
	key := a.LogKey(cfg.Epoch, f.LastSeq)
	var buf bytes.Buffer
	if _, err := frames.WriteBatch(&buf, cfg.Epoch, []frames.Frame{f}, frames.WriteOptions{Level: cfg.Compression}); err != nil {
		return position{}, fmt.Errorf("session: encoding the recovered tail %s: %w", key, err)
	}
	rec := stateRecord{Epoch: cfg.Epoch, Seq: f.LastSeq, CommitTime: f.CommitTime, Checksum: f.SQLite.After, Pages: f.SQLite.DatabasePages, Object: frames.KeyLog}
	state.recordInflight(rec)
	if _, err := cfg.Bucket.Put(ctx, key, bytes.NewReader(buf.Bytes()), int64(buf.Len()), bucket.Condition{}); err != nil {
		return position{}, fmt.Errorf("session: uploading the tail recovered from the followers %s: %w", key, err)
	}
	state.recordDurable(rec)
	if err := writePages(path, f.SQLite); err != nil {
		return position{}, err
	}
	cfg.Logger.Info("recovered a tail from the followers", logattr.Actor, a.Actor, logattr.Key, key,
		"entries", len(tail), "first", f.FirstSeq, "last", f.LastSeq)
	return position{seq: f.LastSeq, commitTime: f.CommitTime}, nil
}

// mergeTail checks every entry of tail against track (advancing it) and
// merges their pages into one frame: the newest version of each page, no
// page past the final size, zeros for growth nobody wrote (as a batch
// merges commits: batcher.go).
func mergeTail(a frames.Actor, track *lanes.Tracker, tail []follow.Entry) (frames.Frame, error) {
	pages := map[uint32][]byte{}
	var last frames.Frame
	first := tail[0].Seq
	for i := range tail {
		e := &tail[i]
		what := fmt.Sprintf("entry %d of the tail of %s recovered from the followers", e.Seq, a.Prefix())
		fail := func(msg string, args ...any) (frames.Frame, error) {
			return frames.Frame{}, fmt.Errorf("session: %s: %s (%w)", what, fmt.Sprintf(msg, args...), frames.ErrCorrupt)
		}
		_, fs, err := frames.ReadBatch(bytes.NewReader(e.Body), what, frames.Limits{})
		if err != nil {
			return frames.Frame{}, fmt.Errorf("session: %w", err)
		}
		if len(fs) != 1 {
			return fail("%d frames, not 1", len(fs))
		}
		f := fs[0]
		switch {
		case f.Kind != frames.KindSQLitePages || f.Lane != lanes.MainLane:
			return fail("%s is not a commit of the database", f.String())
		case f.FirstSeq != e.Seq || f.LastSeq != e.Seq:
			return fail("holds seq %d..%d", f.FirstSeq, f.LastSeq)
		case f.SQLite.PageSize != track.PageSize():
			return fail("page size %d, the database's is %d", f.SQLite.PageSize, track.PageSize())
		case f.SQLite.Before != e.Before || e.Before != track.Checksum():
			return fail("starts from checksum %s (entry %s), the database is at %s", f.SQLite.Before, e.Before, track.Checksum())
		}
		prev := track.Pages()
		for _, p := range f.SQLite.Pages {
			if err := track.Write(p.Number, p.Data); err != nil {
				return fail("%v", err)
			}
			pages[p.Number] = p.Data
		}
		if err := track.Resize(f.SQLite.DatabasePages); err != nil {
			return fail("%v", err)
		}
		if got := track.Checksum(); got != e.After || got != f.SQLite.After {
			return fail("its pages give checksum %s, it claims %s (frame %s)", got, e.After, f.SQLite.After)
		}
		n := f.SQLite.DatabasePages
		switch {
		case n < prev:
			for pg := range pages {
				if pg > n {
					delete(pages, pg)
				}
			}
		case n > prev:
			for pg := prev + 1; pg <= n; pg++ {
				if !slices.ContainsFunc(f.SQLite.Pages, func(p frames.Page) bool { return p.Number == pg }) {
					pages[pg] = make([]byte, f.SQLite.PageSize)
				}
			}
		}
		last = f
	}
	out := make([]frames.Page, 0, len(pages))
	for n, d := range pages {
		out = append(out, frames.Page{Number: n, Data: d})
	}
	slices.SortFunc(out, func(x, y frames.Page) int { return int(x.Number) - int(y.Number) })
	f := frames.Frame{
		FirstSeq: first, LastSeq: last.LastSeq, Lane: lanes.MainLane, CommitTime: last.CommitTime, Kind: frames.KindSQLitePages,
		SQLite: frames.SQLitePages{PageSize: last.SQLite.PageSize, DatabasePages: last.SQLite.DatabasePages, Pages: out,
			Before: tail[0].Before, After: last.SQLite.After},
	}
	return f, nil
}

// writePages writes a frame's pages into the database file at path and
// sets its size, then syncs it. No connection has the file open: Open
// runs it before the capture attaches.
func writePages(path string, p frames.SQLitePages) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	defer f.Close()
	for _, pg := range p.Pages {
		if _, err := f.WriteAt(pg.Data, int64(pg.Number-1)*int64(p.PageSize)); err != nil {
			return fmt.Errorf("session: writing the recovered tail into %s: %w", path, err)
		}
	}
	if err := f.Truncate(int64(p.DatabasePages) * int64(p.PageSize)); err != nil {
		return fmt.Errorf("session: writing the recovered tail into %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("session: syncing %s: %w", path, err)
	}
	return nil
}
