package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
	"github.com/framectl/framectl/internal/workers"
)

// chunkUse is a chunk as a manifest names it: its key and the content
// size its pages give it.
type chunkUse struct {
	key  string
	size uint64
}

// checkChunks reads every chunk a manifest read so far names, once per
// size it is named at, unless the replay loaded it already, and warns of
// listed chunks no manifest names once they are older than the grace.
func (v *verifier) checkChunks(ctx context.Context) error {
	users := map[chunkUse][]string{} // the manifests naming each use
	named := map[frames.ChunkHash]bool{}
	for _, key := range slices.Sorted(maps.Keys(v.manifests)) {
		for _, l := range v.manifests[key].Lanes {
			for _, c := range l.Chunks {
				u := chunkUse{key: v.a.ChunkKey(c.Hash), size: uint64(c.Pages) * uint64(l.PageSize)}
				if ms := users[u]; len(ms) == 0 || ms[len(ms)-1] != key {
					users[u] = append(ms, key)
				}
				named[c.Hash] = true
			}
		}
	}
	for _, c := range v.inv.Chunks {
		if !named[c.Hash] {
			v.unnamedChunk(c)
		}
	}
	var todo []chunkUse
	v.mu.Lock()
	for _, u := range slices.SortedFunc(maps.Keys(users), func(x, y chunkUse) int {
		return cmp.Or(strings.Compare(x.key, y.key), cmp.Compare(x.size, y.size))
	}) {
		if !v.chunkOK[u] && !v.reported[u.key] {
			todo = append(todo, u)
		}
	}
	v.mu.Unlock()

	return workers.Run(ctx, todo, min(v.opts.Parallelism, len(todo)), func(ctx context.Context, buf *[]byte, u chunkUse) error {
		return v.checkChunk(ctx, u, users[u], buf)
	})
}

// unnamedChunk reports a listed chunk no manifest names: a warning once it
// is older than the grace, else only counted (verify.go says why).
func (v *verifier) unnamedChunk(c Chunk) {
	msg := "no manifest names this chunk (uploaded for a manifest not written yet, or left by one deleted since; compaction deletes it once it is older than the grace)"
	if v.chunkGrace > 0 {
		// A zero time is a backend that did not say: not known to be
		// old, as the collector takes it.
		if c.ModTime.IsZero() || c.ModTime.After(v.listedAt.Add(-v.chunkGrace)) {
			v.mu.Lock()
			v.rep.ChunksWithinGrace++
			v.mu.Unlock()
			return
		}
		msg = fmt.Sprintf("no manifest names this chunk, last written %s, more than the grace (%s) ago: no compaction pass has collected it since",
			c.ModTime.UTC().Format(time.RFC3339), v.chunkGrace)
	}
	v.add(Problem{Key: c.Key, Kind: KindStray, Severity: Warning, Message: msg})
}

// checkChunk reads one chunk to its verified end at the size its
// manifests give it. Damage goes into the report; the error is for I/O.
func (v *verifier) checkChunk(ctx context.Context, u chunkUse, manifests []string, buf *[]byte) error {
	rc, _, err := v.b.Get(ctx, u.key)
	if errors.Is(err, bucket.ErrNotFound) {
		v.chunkDamage(ctx, u.key, manifests, fmt.Errorf("%w: %v", chunks.ErrMissing, err))
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	cr := iocount.NewReader(rc, nil)
	_, content, err := frames.ReadChunk(cr, u.key, u.size, *buf, v.opts.Limits)
	if err == nil {
		*buf = content
	}
	v.mu.Lock()
	v.rep.Objects++
	v.rep.Bytes += cr.Count()
	if err == nil {
		v.chunkOK[u] = true
	}
	v.mu.Unlock()
	if v.progress != nil {
		v.progress(Progress{Actor: v.a, Phase: PhaseVerify, Key: u.key})
	}
	if err != nil {
		if _, sev := classify(err); sev == 0 {
			return err
		}
		v.chunkDamage(ctx, u.key, manifests, err)
	}
	return nil
}

// chunkDamage reports a damaged or missing chunk, named by its key, with
// the manifests that need it, and marks those manifests unloadable. A
// chunk missing because every manifest naming it was deleted since the
// listing (compaction) is no damage.
func (v *verifier) chunkDamage(ctx context.Context, chunk string, manifests []string, err error) {
	if errors.Is(err, chunks.ErrMissing) {
		var still []string
		for _, m := range manifests {
			if _, serr := v.b.Stat(ctx, m); !errors.Is(serr, bucket.ErrNotFound) {
				still = append(still, m) // present, or unknown: the safe side is to report
			}
		}
		if manifests = still; len(manifests) == 0 {
			return
		}
	}
	kind, _ := classify(err)
	var epoch frames.Epoch
	if k, perr := frames.ParseKey(manifests[0]); perr == nil {
		epoch = k.Epoch
	}
	detail := "does not exist"
	var fe *frames.Error
	var mm *frames.KeyMismatchError
	switch {
	case errors.Is(err, chunks.ErrMissing):
	case errors.As(err, &mm) && mm.Key.Kind == frames.KeyChunk:
		// A chunk's key is checked last, once its seal and its content's
		// hash verified: a sound chunk under another chunk's key.
		detail = fmt.Sprintf("stored under a wrong key: the object reads whole and its content is the chunk %s, not %s", mm.Chunk, mm.Key.Chunk)
	case errors.As(err, &fe):
		detail = fe.Err.Error()
	default:
		detail = cause(err)
	}
	name := "manifest " + manifests[0]
	if len(manifests) > 1 {
		name = "manifests " + strings.Join(manifests, ", ")
	}
	v.add(Problem{Key: chunk, Kind: kind, Severity: Damage, Epoch: epoch,
		Message: fmt.Sprintf("named by %s: %s", name, detail)})
	v.mu.Lock()
	for _, m := range manifests {
		v.unloadable[m] = true
	}
	v.mu.Unlock()
}
