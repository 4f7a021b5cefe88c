package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// What the owner keeps of what it uploaded. A compaction pass replays the
// session's newest snapshot and the batches after it (compaction.go); an
// owner has uploaded every one of those objects itself, so it keeps a copy
// of each on its own disk under Dir/kept and the pass reads them there
// instead of the bucket: batches and manifests as the uploader and the
// session start put them, chunks as they were put or as a pass first
// fetched them. On a hot database a pass then makes no GET at all but
// own.json's (BENCHMARKS.md, "Compaction reads").
//
// The copies are a cache, never a source of truth: what a pass reads from
// them goes through exactly the checks a read from the bucket does
// (restore.Replay: checksums, chain, tracked lane checksums), and a pass
// that fails while reading through them is run again from the bucket
// alone, with every copy dropped. Keys are the bucket's; a batch or
// manifest key names its epoch, which is this session's, so no other
// writer puts an object of that key; a chunk key is the hash of its
// content. Copies are written without fsync: one torn by a power loss
// fails its check and is dropped like any other.
//
// The copies are bounded by Config.KeptBytes; an object that does not
// fit is simply not kept, and a pass fetches it. After a pass that wrote a
// snapshot, the copies it no longer needs go: batches it covers, other
// manifests, chunks its manifest does not name. At session start, batches
// and manifests of earlier sessions go (never read again) and chunks stay:
// the new session's snapshot names most of them.

// keptDir is the directory under Config.Dir that holds the copies.
const keptDir = "kept"

// maxKeptObject is the largest object kept: batches, manifests and chunks
// are far smaller; a full snapshot (a session before manifests) is not
// kept.
const maxKeptObject = 8 << 20

// kept is a bucket that keeps copies of the actor's objects put through
// it, and of chunks read through it, and serves reads of them from disk.
// Everything else passes through to the bucket unchanged.
type kept struct {
	bucket.Bucket
	dir    string
	actor  frames.Actor
	budget int64
	log    *slog.Logger

	mu    sync.Mutex
	files map[string]int64 // key → size of the copy
	total int64
	hits  int64 // reads served from a copy
}

// openKept opens the copies under dir for actor a, dropping what an
// earlier session kept but chunks.
func openKept(b bucket.Bucket, dir string, a frames.Actor, budget int64, log *slog.Logger) (*kept, error) {
	k := &kept{Bucket: b, dir: dir, actor: a, budget: budget, log: log, files: map[string]int64{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	for _, e := range ents {
		key, err := url.PathUnescape(e.Name())
		var info fs.FileInfo
		if err == nil {
			info, err = e.Info()
		}
		if err == nil && k.chunk(key) && info.Mode().IsRegular() && k.total+info.Size() <= budget {
			k.files[key] = info.Size()
			k.total += info.Size()
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
	}
	return k, nil
}

// chunk reports whether key is one of the actor's chunks.
func (k *kept) chunk(key string) bool {
	pk, err := frames.ParseKey(key)
	return err == nil && pk.Kind == frames.KeyChunk && pk.ActorOf() == k.actor
}

// keepable reports whether an object of key may be kept: the actor's
// batches, snapshots and chunks.
func (k *kept) keepable(key string) bool {
	pk, err := frames.ParseKey(key)
	if err != nil || pk.ActorOf() != k.actor {
		return false
	}
	switch pk.Kind {
	case frames.KeyLog, frames.KeySnapshot, frames.KeyChunk:
		return true
	}
	return false
}

func (k *kept) path(key string) string { return filepath.Join(k.dir, url.PathEscape(key)) }

// Put puts the object and keeps a copy of it when it may be kept and fits.
func (k *kept) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if cond != (bucket.Condition{}) || size < 0 || size > maxKeptObject || !k.keepable(key) {
		return k.Bucket.Put(ctx, key, body, size, cond)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(body, data); err != nil {
		return bucket.Info{}, fmt.Errorf("session: reading the body of %s: %w", key, err)
	}
	// Kept before the put: a pass that lists the object once it landed
	// must find the copy, even while this call has not returned. A put
	// that fails drops it (the object may not be in the bucket; one that
	// landed anyway is put again by the caller's retry, or read from the
	// bucket).
	k.keep(key, data)
	info, err := k.Bucket.Put(ctx, key, bytes.NewReader(data), size, cond)
	if err != nil {
		k.forget(key)
	}
	return info, err
}

// keep writes a copy of key's object, if it fits. A copy that cannot be
// written is not kept: the bucket has the object.
func (k *kept) keep(key string, data []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	old, had := k.files[key]
	if k.total-old+int64(len(data)) > k.budget {
		return
	}
	tmp, err := os.CreateTemp(k.dir, ".tmp-*")
	if err == nil {
		_, err = tmp.Write(data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), k.path(key))
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		k.log.Warn("cannot keep a copy of an uploaded object", logattr.Key, key, logattr.Err, err)
		return
	}
	if had {
		k.total -= old
	}
	k.files[key] = int64(len(data))
	k.total += int64(len(data))
}

// Get reads the copy of key when one is kept, and the bucket otherwise;
// a chunk read from the bucket to its end is kept.
func (k *kept) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	k.mu.Lock()
	size, ok := k.files[key]
	k.mu.Unlock()
	if ok {
		f, err := os.Open(k.path(key))
		if err == nil {
			k.mu.Lock()
			k.hits++
			k.mu.Unlock()
			return f, bucket.Info{Key: key, Size: size}, nil
		}
		k.forget(key)
	}
	rc, info, err := k.Bucket.Get(ctx, key)
	if err != nil || info.Size < 0 || info.Size > maxKeptObject || !k.chunk(key) {
		return rc, info, err
	}
	r := &keeping{ReadCloser: rc, k: k, key: key, want: info.Size}
	r.buf.Grow(int(info.Size))
	return r, info, nil
}

// Delete deletes the object and its copy.
func (k *kept) Delete(ctx context.Context, key string) error {
	k.forget(key)
	return k.Bucket.Delete(ctx, key)
}

// DeleteMany deletes the objects and their copies.
func (k *kept) DeleteMany(ctx context.Context, keys []string) error {
	for _, key := range keys {
		k.forget(key)
	}
	return k.Bucket.DeleteMany(ctx, keys)
}

func (k *kept) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgetLocked(key)
}

func (k *kept) forgetLocked(key string) {
	if size, ok := k.files[key]; ok {
		delete(k.files, key)
		k.total -= size
		os.Remove(k.path(key))
	}
}

// clear drops every copy: after a pass that failed reading through them.
func (k *kept) clear() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.files {
		k.forgetLocked(key)
	}
}

// served returns how many reads copies served.
func (k *kept) served() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hits
}

// compacted drops the copies a pass that wrote the snapshot at key no
// longer needs: batches of the session at or before its seq, other
// snapshots, and, when its manifest is kept, chunks it does not name. A
// manifest that cannot be read leaves the chunks alone (the next pass
// decides again).
func (k *kept) compacted(key string, lim frames.Limits) {
	snap, err := frames.ParseKey(key)
	if err != nil {
		return
	}
	var named map[string]bool
	if f, err := os.Open(k.path(key)); err == nil {
		m, err := frames.ReadManifest(f, key, lim)
		f.Close()
		if err == nil {
			named = map[string]bool{}
			for _, l := range m.Lanes {
				for _, c := range l.Chunks {
					named[k.actor.ChunkKey(c.Hash)] = true
				}
			}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for name := range k.files {
		pk, err := frames.ParseKey(name)
		if err != nil {
			k.forgetLocked(name)
			continue
		}
		switch pk.Kind {
		case frames.KeyLog:
			if pk.Epoch < snap.Epoch || pk.Epoch == snap.Epoch && pk.Seq <= snap.Seq {
				k.forgetLocked(name)
			}
		case frames.KeySnapshot:
			if name != key {
				k.forgetLocked(name)
			}
		case frames.KeyChunk:
			if named != nil && !named[name] {
				k.forgetLocked(name)
			}
		}
	}
}

// keeping is a chunk read from the bucket; read to its end, it is kept.
type keeping struct {
	io.ReadCloser
	k    *kept
	key  string
	want int64
	buf  bytes.Buffer
	done bool
}

func (r *keeping) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.buf.Write(p[:n])
	if errors.Is(err, io.EOF) && !r.done {
		r.done = true
		if int64(r.buf.Len()) == r.want {
			r.k.keep(r.key, r.buf.Bytes())
		}
	}
	return n, err
}
