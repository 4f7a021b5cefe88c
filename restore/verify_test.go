package restore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/race"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// owned is a small bucket written by a real workload and made to look
// owned: session 1 (superseded) and session 2 (current), own.json naming
// session 2 and node-a, and node-a's lease.
type owned struct {
	b       bucket.Bucket
	w       *workload
	want    []byte                   // the latest state
	objects map[string][]byte        // every object of the actor, own.json included
	onPath  map[string]bool          // objects a latest restore reads
	epoch   map[string]frames.Epoch  // epoch of each batch and snapshot
	batches []string                 // session 2's batches, ascending
	ranges  map[string][2]frames.Seq // each batch's sequence numbers
}

const ownedNode = "node-a"

func newOwned(t *testing.T, b bucket.Bucket) *owned {
	// 512-byte pages keep every object small: the sweep flips every byte.
	w := newWorkload(t, b, "sweep", 42, 512)
	w.tiny = true
	round := func() {
		w.ops(2)
		w.exec(0, "INSERT INTO t(a,b) VALUES(0, x'00')") // at least one commit, so one batch or more
		w.durable()
	}
	round()
	w.newSession(2)
	for range 3 {
		round()
	}
	w.closeDB()
	ctx := t.Context()
	rec := fence.Record{Epoch: 2, Node: ownedNode, Address: "10.0.0.5:8080"}.Marshal()
	_, err := b.Put(ctx, w.actor.OwnKey(), bytes.NewReader(rec), int64(len(rec)), bucket.Condition{})
	require.NoError(t, err)
	lease := fence.Lease{Node: ownedNode, Address: "10.0.0.5:8080", Heartbeat: 7}.Marshal()
	if _, err := b.Put(ctx, frames.NodeKey(ownedNode), bytes.NewReader(lease), int64(len(lease)), bucket.Condition{}); err != nil {
		t.Fatal(err)
	}
	o := &owned{b: b, w: w, want: w.points[len(w.points)-1].data, objects: map[string][]byte{}, onPath: map[string]bool{},
		epoch: map[string]frames.Epoch{}, ranges: map[string][2]frames.Seq{}}
	for _, k := range buckettest.Keys(t, b, w.actor.Prefix()) {
		data, _, err := bucket.ReadAll(ctx, b, k, 1<<30)
		require.NoError(t, err)
		o.objects[k] = data
		pk, err := frames.ParseKey(k)
		require.NoError(t, err)
		o.epoch[k] = pk.Epoch
		if pk.Epoch == 2 || pk.Kind == frames.KeyOwn {
			o.onPath[k] = true
		}
		if pk.Kind == frames.KeyLog {
			hdr, _, err := frames.ReadBatch(bytes.NewReader(data), k, frames.Limits{})
			require.NoError(t, err)
			o.ranges[k] = [2]frames.Seq{hdr.FirstSeq, hdr.LastSeq}
			if pk.Epoch == 2 {
				o.batches = append(o.batches, k)
			}
		}
	}
	if len(o.batches) < 3 {
		t.Fatalf("session 2 has %d batches, the test needs 3", len(o.batches))
	}
	// A latest restore reads the chunks of session 2's manifest too.
	chunked := false
	for key, m := range manifestsOf(t, b, w.actor) {
		if m.Epoch != 2 {
			continue
		}
		for _, l := range m.Lanes {
			for _, c := range l.Chunks {
				ck := w.actor.ChunkKey(c.Hash)
				require.Contains(t, o.objects, ck, "a chunk %s names", key)
				o.onPath[ck], chunked = true, true
			}
		}
	}
	require.True(t, chunked, "session 2's snapshot names no chunk")
	return o
}

// check runs Verify and Restore on bucket b and returns what went wrong
// with respect to damage of object key: Verify must report damage naming
// exactly that key, and Restore must fail when it reads the object, or
// else return exactly the latest state.
//
// One alteration of own.json is a warning, not damage: a node ID altered
// into another valid one names a node without a lease, which is what a
// holder whose lease was swept looks like too. Verify must then warn about
// own.json, and report no damage.
func (o *owned) check(ctx context.Context, b bucket.Bucket, key, scratch string) error {
	rep, err := restore.Verify(ctx, b, o.w.actor, restore.VerifyOptions{ScratchDir: scratch})
	if err != nil {
		return fmt.Errorf("verify failed instead of reporting: %v", err)
	}
	if key == o.w.actor.OwnKey() {
		data, _, err := bucket.ReadAll(ctx, b, key, fence.MaxRecordBytes)
		if err != nil {
			return err
		}
		if rec, err := fence.ParseRecord(key, data); err == nil && bytes.Equal(data, rec.Marshal()) &&
			rec.Epoch == 2 && rec.Node != ownedNode && !rec.Released() {
			for _, p := range rep.Problems {
				if p.Severity == restore.Damage {
					return fmt.Errorf("own.json names node %q: damage reported instead of a warning: %s", rec.Node, p)
				}
			}
			warned := false
			for _, p := range rep.Problems {
				warned = warned || p.Key == key && p.Kind == restore.KindOwn && p.Severity == restore.Warning && strings.Contains(p.Message, "lease")
			}
			if !warned {
				return fmt.Errorf("own.json names node %q, which has no lease: no warning (problems: %v)", rec.Node, rep.Problems)
			}
			return o.checkRestore(ctx, b, key, scratch)
		}
	}
	named := false
	for _, p := range rep.Problems {
		if p.Severity != restore.Damage {
			continue
		}
		if p.Key != key {
			return fmt.Errorf("damage reported on another object: %s", p)
		}
		named = true
	}
	if !named {
		return fmt.Errorf("no damage reported (problems: %v)", rep.Problems)
	}
	if rep.Err() == nil || !errors.Is(rep.Err(), restore.ErrDamage) {
		return fmt.Errorf("Report.Err is %v with damage in the report", rep.Err())
	}
	return o.checkRestore(ctx, b, key, scratch)
}

// checkRestore restores from b with object key damaged: it must fail when
// it reads the object, or else return exactly the latest state.
func (o *owned) checkRestore(ctx context.Context, b bucket.Bucket, key, scratch string) error {
	dest := filepath.Join(scratch, "restored.db")
	_, err := restore.Restore(ctx, b, o.w.actor, dest, restore.Options{})
	defer os.Remove(dest)
	if err == nil {
		if o.onPath[key] && key != o.w.actor.OwnKey() {
			return errors.New("restore succeeded although it read the damaged object")
		}
		got, rerr := os.ReadFile(dest)
		if rerr != nil {
			return rerr
		}
		if !bytes.Equal(got, o.want) {
			return errors.New("restore returned a database that differs from the latest state")
		}
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// mutation is one damaged version of one object.
type mutation struct {
	key  string
	what string
	data []byte
}

func (o *owned) mutations(bitFlipsEvery int) []mutation {
	var ms []mutation
	for key, data := range o.objects {
		for i := range data {
			flipped := bytes.Clone(data)
			flipped[i] ^= 0xff
			ms = append(ms, mutation{key, fmt.Sprintf("byte %d ^ 0xff", i), flipped})
			bits := []byte{0x01, 0x80}
			if key == o.w.actor.OwnKey() {
				// own.json has no checksum of its own: every bit of it.
				bits = []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80}
			}
			if i%bitFlipsEvery == 0 || i == len(data)-1 || key == o.w.actor.OwnKey() {
				for _, bit := range bits {
					flipped := bytes.Clone(data)
					flipped[i] ^= bit
					ms = append(ms, mutation{key, fmt.Sprintf("byte %d ^ %#02x", i, bit), flipped})
				}
			}
		}
		for n := range len(data) {
			ms = append(ms, mutation{key, fmt.Sprintf("truncated to %d of %d bytes", n, len(data)), data[:n]})
		}
	}
	return ms
}

// TestCorruptionSweep damages every object of a real bucket in every way
// a byte can go wrong: every byte flipped (XOR 0xff), single-bit flips at
// a spread of positions, and a truncation at every length. Verify must
// name exactly the damaged object, and Restore must never return a
// database other than the latest state (and fail whenever it reads the
// damaged object).
//
// The damaged versions are served by an overlay over the real directory
// bucket (one object replaced), so that thousands of cases run in seconds;
// a sample of them is written for real to versitygw and the directory
// bucket below (TestCorruptionStored).
func TestCorruptionSweep(t *testing.T) {
	o := newOwned(t, buckettest.Dir(t))
	ms := o.mutations(7)
	if race.Enabled {
		// Under the race detector, every third mutation keeps every kind
		// of damage at every object.
		var cut []mutation
		for i := 0; i < len(ms); i += 3 {
			cut = append(cut, ms[i])
		}
		ms = cut
	}
	total := 0
	for _, d := range o.objects {
		total += len(d)
	}
	t.Logf("%d objects, %d bytes, %d damaged versions", len(o.objects), total, len(ms))

	var (
		mu       sync.Mutex
		failures []string
	)
	work := make(chan mutation)
	var wg sync.WaitGroup
	for range max(2, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := fastScratch(t)
			for m := range work {
				err := o.check(t.Context(), &overlay{Bucket: o.b, key: m.key, data: m.data}, m.key, scratch)
				if err == nil {
					continue
				}
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s %s: %v", m.key, m.what, err))
				mu.Unlock()
			}
		}()
	}
	for _, m := range ms {
		work <- m
	}
	close(work)
	wg.Wait()
	for i, f := range failures {
		if i == 20 {
			t.Errorf("... and %d more", len(failures)-20)
			break
		}
		t.Error(f)
	}
	// own.json has no checksum of its own: an alteration into another valid
	// record is caught by cross-checks (the epoch against the sessions, the
	// address against the node's lease, the exact bytes fence writes), so
	// every one above must have been reported: as damage, but for a node
	// ID altered into one without a lease, a warning (see check).
}

// fastScratch returns a scratch directory on tmpfs when the machine has
// one: every case of the sweep replays into a new directory and restores
// into a new file, tens of thousands of file creations that an ext4 disk
// makes the sweep's main cost.
func fastScratch(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "framectl-sweep-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// TestCorruptionStored writes damaged objects into real buckets (a sample
// of the sweep's damage: the first, middle and last byte flipped, a
// truncation by one byte and to half) and checks them as the sweep does.
func TestCorruptionStored(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			o := newOwned(t, b)
			for key, data := range o.objects {
				var ms []mutation
				for _, i := range []int{0, len(data) / 2, len(data) - 1} {
					flipped := bytes.Clone(data)
					flipped[i] ^= 0xff
					ms = append(ms, mutation{key, fmt.Sprintf("byte %d ^ 0xff", i), flipped})
				}
				ms = append(ms, mutation{key, "truncated by one byte", data[:len(data)-1]},
					mutation{key, "truncated to half", data[:len(data)/2]})
				for _, m := range ms {
					put(t, b, key, m.data)
					assert.NoError(t, o.check(t.Context(), b, key, t.TempDir()), "%s %s", key, m.what)
				}
				put(t, b, key, data)
			}
		})
	}
}

// TestVerifyCleanBucket: a healthy owned bucket has no damage, the current
// session replayed to its end, and the superseded session as warnings.
func TestVerifyCleanBucket(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			o := newOwned(t, be.New(t))
			rep, err := restore.Verify(t.Context(), o.b, o.w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
			require.NoError(t, err)
			if rep.Damaged() || rep.Err() != nil {
				t.Fatalf("damage in a healthy bucket: %v", rep.Problems)
			}
			last := o.w.points[len(o.w.points)-1]
			if rep.Epoch != 2 || rep.Seq != last.seq || rep.Own == nil || rep.Own.Epoch != 2 {
				t.Fatalf("session %d frame %d own %+v, want session 2 frame %d", rep.Epoch, rep.Seq, rep.Own, last.seq)
			}
			if rep.Objects != len(o.objects) {
				t.Fatalf("%d objects read, the actor has %d", rep.Objects, len(o.objects))
			}
			stray := map[string]bool{}
			for _, p := range rep.Problems {
				assert.Equal(t, restore.KindStray, p.Kind, "unexpected problem: %s", p)
				assert.Equal(t, restore.Warning, p.Severity, "unexpected problem: %s", p)
				assert.Equal(t, frames.Epoch(1), o.epoch[p.Key], "unexpected problem: %s", p)
				stray[p.Key] = true
			}
			for k, s := range o.epoch {
				if s == 1 && !stray[k] {
					t.Errorf("superseded object %s not reported as stray", k)
				}
			}
		})
	}
}

// TestVerifyGaps deletes each batch in turn: a missing batch is a gap with
// its range, in the report and as Restore's error. The last batch of a
// session cannot be told missing from a log that ends earlier; a restore
// then returns the state before it.
func TestVerifyGaps(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			o := newOwned(t, be.New(t))
			for i, key := range o.batches {
				put := hide(t, o.b, key)
				rep, err := restore.Verify(t.Context(), o.b, o.w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
				require.NoError(t, err)
				dest := filepath.Join(t.TempDir(), "r.db")
				res, rerr := restore.Restore(t.Context(), o.b, o.w.actor, dest, restore.Options{})
				want := o.ranges[key]
				if i == len(o.batches)-1 {
					if rep.Damaged() {
						t.Fatalf("the last batch deleted: %v", rep.Problems)
					}
					if rerr != nil || res.Seq != want[0]-1 {
						t.Fatalf("the last batch deleted: restore reached %d (%v), want %d", res.Seq, rerr, want[0]-1)
					}
					put()
					continue
				}
				var gaps []restore.Problem
				for _, p := range rep.Problems {
					if p.Severity == restore.Damage {
						gaps = append(gaps, p)
					}
				}
				if len(gaps) != 1 || gaps[0].Kind != restore.KindGap || gaps[0].From != want[0] || gaps[0].To != want[1] ||
					gaps[0].Key != o.batches[i+1] || gaps[0].Epoch != 2 {
					t.Fatalf("batch %s (frames %d..%d) deleted: damage %v", key, want[0], want[1], gaps)
				}
				var ge *lanes.GapError
				var re *restore.Error
				if !errors.As(rerr, &ge) || ge.From != want[0] || ge.To != want[1] || !errors.As(rerr, &re) || re.Epoch != 2 {
					t.Fatalf("batch %s (frames %d..%d) deleted: restore: %v", key, want[0], want[1], rerr)
				}
				_, err = os.Stat(dest)
				require.ErrorIs(t, err, os.ErrNotExist, "a failed restore left %s", dest)
				put()
			}
		})
	}
}

// overlay serves a bucket with one object replaced.
type overlay struct {
	bucket.Bucket
	key  string
	data []byte
}

func (o *overlay) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if key != o.key {
		return o.Bucket.Get(ctx, key)
	}
	info, err := o.Bucket.Stat(ctx, key)
	if err != nil {
		return nil, bucket.Info{}, err
	}
	info.Size = int64(len(o.data))
	return io.NopCloser(bytes.NewReader(o.data)), info, nil
}

func (o *overlay) Stat(ctx context.Context, key string) (bucket.Info, error) {
	info, err := o.Bucket.Stat(ctx, key)
	if key == o.key && err == nil {
		info.Size = int64(len(o.data))
	}
	return info, err
}

func (o *overlay) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	p, err := o.Bucket.List(ctx, prefix, startAfter, limit)
	for i := range p.Objects {
		if p.Objects[i].Key == o.key {
			p.Objects[i].Size = int64(len(o.data))
		}
	}
	return p, err
}

func put(t testing.TB, b bucket.Bucket, key string, data []byte) {
	t.Helper()
	_, err := b.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
	require.NoError(t, err)
}
