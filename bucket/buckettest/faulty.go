package buckettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/bucket"
)

// ErrInjected is the error a Faulty bucket injects: a transient failure a
// real client must retry, like a timeout or a dropped connection.
var ErrInjected = errors.New("injected fault")

// FaultConfig says which faults a Faulty bucket injects and how often.
// Rates are probabilities from 0 to 1; the zero value injects nothing.
type FaultConfig struct {
	// Seed makes the fault sequence reproducible (for a given order of
	// calls; concurrent callers interleave their draws).
	Seed uint64
	// ErrorRate is the probability that an operation fails with
	// ErrInjected before it reaches the inner bucket.
	ErrorRate float64
	// ErrorRateByOp overrides ErrorRate for the operations it names:
	// "get", "put", "stat", "list", "delete" (DeleteMany counts as one
	// "delete").
	ErrorRateByOp map[string]float64
	// LostResponseRate is the probability that a Put which succeeded in the
	// inner bucket is reported as failed with ErrInjected: the write landed
	// but the client never heard.
	LostResponseRate float64
	// MinLatency and MaxLatency delay every operation by a uniformly random
	// duration between them (the context can cut the wait short).
	MinLatency, MaxLatency time.Duration
	// Lag makes listings stale: a key put less than Lag ago is left out,
	// and a key deleted less than Lag ago is still listed (as it was).
	// Get and Stat are never stale.
	Lag time.Duration
	// Now is the clock Lag is measured on; nil means time.Now. Tests pass a
	// fake clock to make keys appear and vanish without sleeping.
	Now func() time.Time
}

// FaultCounts counts what a Faulty bucket has done.
type FaultCounts struct {
	Calls         int64 // operations started
	Errors        int64 // failed with ErrInjected before reaching the inner bucket
	LostResponses int64 // puts that landed but reported ErrInjected
	Delays        int64 // operations delayed by injected latency
	Hidden        int64 // keys left out of listings (put less than Lag ago)
	Ghosts        int64 // keys listed although deleted (less than Lag ago)
}

// Faulty wraps a bucket and injects faults into it, for tests: errors,
// lost responses, latency and stale listings. Safe for concurrent use.
type Faulty struct {
	inner bucket.Bucket
	cfg   FaultConfig

	mu      sync.Mutex
	rng     *rand.Rand
	written map[string]time.Time // key -> when last put (Lag > 0 only)
	ghosts  map[string]ghost     // key -> what it was when deleted

	nCalls, nErrors, nLost, nDelays, nHidden, nGhosts atomic.Int64
}

type ghost struct {
	info bucket.Info
	at   time.Time
}

var _ bucket.Bucket = (*Faulty)(nil)

// NewFaulty wraps inner.
func NewFaulty(inner bucket.Bucket, cfg FaultConfig) *Faulty {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxLatency < cfg.MinLatency {
		cfg.MaxLatency = cfg.MinLatency
	}
	return &Faulty{
		inner:   inner,
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x6672616d6563746c)),
		written: map[string]time.Time{},
		ghosts:  map[string]ghost{},
	}
}

// Inner returns the wrapped bucket (to look behind the faults in tests).
func (f *Faulty) Inner() bucket.Bucket { return f.inner }

// Counts returns how many faults have been injected so far.
func (f *Faulty) Counts() FaultCounts {
	return FaultCounts{
		Calls:         f.nCalls.Load(),
		Errors:        f.nErrors.Load(),
		LostResponses: f.nLost.Load(),
		Delays:        f.nDelays.Load(),
		Hidden:        f.nHidden.Load(),
		Ghosts:        f.nGhosts.Load(),
	}
}

// String names the inner bucket.
func (f *Faulty) String() string { return f.inner.String() }

// roll draws one random number and reports whether it falls under rate.
func (f *Faulty) roll(rate float64) bool {
	if rate <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < rate
}

// before runs ahead of every operation: latency, then maybe an error.
func (f *Faulty) before(ctx context.Context, op, key string) error {
	f.nCalls.Add(1)
	if err := ctx.Err(); err != nil {
		return &bucket.Error{Op: op, Key: key, Err: err}
	}
	if f.cfg.MaxLatency > 0 {
		f.mu.Lock()
		d := f.cfg.MinLatency
		if span := f.cfg.MaxLatency - f.cfg.MinLatency; span > 0 {
			d += time.Duration(f.rng.Int64N(int64(span) + 1))
		}
		f.mu.Unlock()
		if d > 0 {
			f.nDelays.Add(1)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return &bucket.Error{Op: op, Key: key, Err: ctx.Err()}
			case <-t.C:
			}
		}
	}
	rate := f.cfg.ErrorRate
	if r, ok := f.cfg.ErrorRateByOp[op]; ok {
		rate = r
	}
	if f.roll(rate) {
		f.nErrors.Add(1)
		return &bucket.Error{Op: op, Key: key, Err: ErrInjected}
	}
	return nil
}

// Get may fail or be delayed, then reads the inner bucket.
func (f *Faulty) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if err := f.before(ctx, "get", key); err != nil {
		return nil, bucket.Info{}, err
	}
	return f.inner.Get(ctx, key)
}

// Stat may fail or be delayed, then stats the inner bucket.
func (f *Faulty) Stat(ctx context.Context, key string) (bucket.Info, error) {
	if err := f.before(ctx, "stat", key); err != nil {
		return bucket.Info{}, err
	}
	return f.inner.Stat(ctx, key)
}

// Put may fail or be delayed, then writes the inner bucket; a put that
// landed may still be reported as failed (LostResponseRate).
func (f *Faulty) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if err := f.before(ctx, "put", key); err != nil {
		return bucket.Info{}, err
	}
	info, err := f.inner.Put(ctx, key, body, size, cond)
	if err != nil {
		return info, err
	}
	if f.cfg.Lag > 0 {
		f.mu.Lock()
		f.written[key] = f.cfg.Now()
		f.mu.Unlock()
	}
	if f.roll(f.cfg.LostResponseRate) {
		f.nLost.Add(1)
		return bucket.Info{}, &bucket.Error{Op: "put", Key: key, Err: fmt.Errorf("%w: response lost after the put landed", ErrInjected)}
	}
	return info, nil
}

// Delete may fail or be delayed, then deletes from the inner bucket.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	if err := f.before(ctx, "delete", key); err != nil {
		return err
	}
	f.rememberDeleted(ctx, key)
	return f.inner.Delete(ctx, key)
}

// DeleteMany may fail or be delayed as a whole, then deletes from the
// inner bucket.
func (f *Faulty) DeleteMany(ctx context.Context, keys []string) error {
	if err := f.before(ctx, "delete", describeKeys(keys)); err != nil {
		return err
	}
	for _, key := range keys {
		f.rememberDeleted(ctx, key)
	}
	return f.inner.DeleteMany(ctx, keys)
}

// rememberDeleted records what a key looked like before a delete, so that
// listings can show it for Lag longer. Best effort: a key that cannot be
// stat'ed was not there to be shown.
func (f *Faulty) rememberDeleted(ctx context.Context, key string) {
	if f.cfg.Lag <= 0 {
		return
	}
	info, err := f.inner.Stat(ctx, key)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.ghosts[key] = ghost{info: info, at: f.cfg.Now()}
	f.mu.Unlock()
}

// List lists the inner bucket and, with Lag set, edits the result: keys put
// less than Lag ago are dropped, keys deleted less than Lag ago are merged
// back in. A page whose keys were all dropped is not returned empty with
// More set (the caller could not page on from it): the next inner page is
// fetched instead.
func (f *Faulty) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	if err := f.before(ctx, "list", prefix); err != nil {
		return bucket.Page{}, err
	}
	if f.cfg.Lag <= 0 {
		return f.inner.List(ctx, prefix, startAfter, limit)
	}
	if limit <= 0 {
		limit = bucket.DefaultPageSize
	}
	var out []bucket.Info
	after := startAfter
	for {
		page, err := f.inner.List(ctx, prefix, after, limit)
		if err != nil {
			return bucket.Page{}, err
		}
		if page.More && len(page.Objects) == 0 {
			return bucket.Page{}, &bucket.Error{Op: "list", Key: prefix, Err: errors.New("inner bucket reported more keys but listed none")}
		}
		// This inner page covers keys in (after, upTo]; all of them if it
		// is the last.
		upTo := ""
		if page.More {
			upTo = page.Objects[len(page.Objects)-1].Key
		}
		out = append(out, f.stale(page.Objects, prefix, after, upTo)...)
		if len(out) > limit {
			return bucket.Page{Objects: out[:limit], More: true}, nil
		}
		if len(out) == limit || !page.More {
			return bucket.Page{Objects: out, More: page.More}, nil
		}
		after = upTo
	}
}

// stale turns one inner page into what a lagging listing shows: objs
// without recently written keys, plus the recently deleted keys in (after,
// upTo] ("" = no upper bound), in order.
func (f *Faulty) stale(objs []bucket.Info, prefix, after, upTo string) []bucket.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	for k, t := range f.written {
		if now.Sub(t) >= f.cfg.Lag {
			delete(f.written, k)
		}
	}
	for k, g := range f.ghosts {
		if now.Sub(g.at) >= f.cfg.Lag {
			delete(f.ghosts, k)
		}
	}
	out := make([]bucket.Info, 0, len(objs))
	listed := map[string]bool{}
	for _, o := range objs {
		if _, recent := f.written[o.Key]; recent {
			if g, ok := f.ghosts[o.Key]; ok {
				out = append(out, g.info) // deleted, re-put: the old one shows
				listed[o.Key] = true
				f.nGhosts.Add(1)
			}
			f.nHidden.Add(1)
			continue
		}
		out = append(out, o)
		listed[o.Key] = true
	}
	for k, g := range f.ghosts {
		if listed[k] || !strings.HasPrefix(k, prefix) || k <= after || (upTo != "" && k > upTo) {
			continue
		}
		out = append(out, g.info)
		f.nGhosts.Add(1)
	}
	slices.SortFunc(out, func(a, b bucket.Info) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// describeKeys names a batch of keys in an error without listing them all.
func describeKeys(keys []string) string {
	switch len(keys) {
	case 0:
		return ""
	case 1:
		return keys[0]
	}
	return fmt.Sprintf("%s (and %d more)", keys[0], len(keys)-1)
}
