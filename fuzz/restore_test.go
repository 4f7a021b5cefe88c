package fuzz

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
)

// FuzzRestore damages a real bucket (see history) with a program of
// mutations read from the input (restore_mutate_test.go: bytes flipped,
// objects cut, dropped, copied under other keys, swapped, garbage added,
// content changed under a valid seal) and then restores and verifies it
// from a directory bucket. What must hold, whatever the damage:
//
//   - nothing panics, and restore and verification together allocate
//     less than restoreAllocBound, whatever sizes the objects claim;
//
//   - a restore that succeeds returns exactly the clean database at the
//     frame it reports (Result.Seq), never past the target, with the
//     size and checksum it reports; the clean states all pass
//     integrity_check (checked when the history is built), so the
//     restored file does too;
//
//   - when no object of the clean bucket was removed or changed (garbage
//     added is allowed), a restore that succeeds reaches the target: the
//     clean latest state, or the state at the frame asked for;
//
//   - a restore that succeeds short of its target (today, when the tail
//     of the log is gone: see below) leaves no batch or snapshot of its
//     session between the frame reached and the target in the bucket: it
//     passed over nothing it should have applied or failed on;
//
//   - a restore that fails returns a *restore.Error matching one of the
//     documented sentinels and leaves nothing beside its destination;
//
//   - an untouched bucket restores and verifies clean;
//
//   - verification never fails on a directory bucket, names every object
//     whose bytes are not what the writer stored under that key (a valid
//     seal over changed content excepted: only the checks behind the seal
//     can see that), and reports damage whenever a latest restore fails.
//
//   - a successful restore never returns a state older than its target
//     while own.json is intact: the release recorded where the session
//     ended (fence.Record.Seq), and losing the tail is an error
//     (restore.ErrTailMissing). With own.json gone or altered that end is
//     unknowable, as after a crash, and only the weaker property above
//     holds.
func FuzzRestore(f *testing.F) {
	h := newHistory(f, f.TempDir())
	scratch := fuzzScratch(f)
	b := newFuzzBucket(f, filepath.Join(scratch, "bucket"))
	// An execution allocates about 4 MiB, and at the default GOGC each one
	// ran a collection: 3.7 ms of CPU per execution at 100, 2.4 ms at 400,
	// over 400 random programs (uninstrumented). The allocation bound is
	// checked on totals, which the collector does not change.
	old := debug.SetGCPercent(400)
	f.Cleanup(func() { debug.SetGCPercent(old) })
	for _, seed := range h.seeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d := h.mutate(t, in)
		b.hold(t, d.objects)
		dir, err := os.MkdirTemp(scratch, "exec-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "out")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(out, "restored.db")
		ctx := context.Background()
		var (
			res        restore.Result
			rep        restore.Report
			rerr, verr error
		)
		// The restore skips its integrity_check: the database it returns is
		// compared byte for byte with a clean state that passed one when
		// the history was built, which is stronger, and verification runs
		// the check on its own replay. (It was an eighth of an execution.)
		ropts := restore.Options{Target: d.target, Limits: limits, SkipIntegrityCheck: true}
		if alloc := allocatedBy(func() {
			res, rerr = restore.Restore(ctx, b.dir, h.actor, dest, ropts)
			rep, verr = restore.Verify(ctx, b.dir, h.actor, restore.VerifyOptions{ScratchDir: dir, Limits: limits})
		}); alloc > restoreAllocBound {
			t.Fatalf("restore and verify allocated %d bytes, bound %d", alloc, restoreAllocBound)
		}
		h.checkRestore(t, &d, res, rerr, dest)
		h.checkVerify(t, &d, rep, verr, rerr)
	})
}

// restoreAllocBound is the most one execution may allocate. Restoring and
// verifying the clean bucket allocate about 4 MiB together (SQLite's
// memory for verification's integrity_check included); on top of that the
// limits (fuzz_test.go) let each of the few messages being decoded at
// once hold up to 1 MiB. An object whose claimed sizes were believed
// past the limits (a lane, a page count, a frame) would need far more.
const restoreAllocBound = 32 << 20

// restoreSentinels are the errors a failed restore may match (restore's
// errors.go lists them).
var restoreSentinels = []error{
	frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge, frames.ErrUnknownKind, frames.ErrInvalid,
	lanes.ErrGap, lanes.ErrChecksum, fence.ErrBadRecord, bucket.ErrTooLarge,
	restore.ErrNoSnapshot, restore.ErrIntegrity, restore.ErrOwnMismatch, restore.ErrTargetOutOfRange, restore.ErrTailMissing,
	chunks.ErrMissing,
}

// reachable is the sequence number a restore of the clean bucket to d's
// target reaches, and whether it succeeds at all (a seq before session 2
// has no snapshot in the current session, and one past the latest is out
// of range).
func (h *history) reachable(d *damaged) (frames.Seq, bool) {
	if !d.toSeq {
		return h.latest, true
	}
	return min(d.seq, h.latest), d.seq >= h.sessionStart && d.seq <= h.latest
}

func (h *history) checkRestore(t *testing.T, d *damaged, res restore.Result, err error, dest string) {
	t.Helper()
	want, ok := h.reachable(d)
	if err != nil {
		if d.intact(h) && ok {
			t.Fatalf("restoring the clean bucket to %s: %v", d.target, err)
		}
		var re *restore.Error
		if !errors.As(err, &re) {
			t.Fatalf("restore failed with %v (%T), not a *restore.Error", err, err)
		}
		if !slices.ContainsFunc(restoreSentinels, func(s error) bool { return errors.Is(err, s) }) {
			t.Fatalf("restore failed with %v, which matches no documented sentinel", err)
		}
		if left, _ := os.ReadDir(filepath.Dir(dest)); len(left) > 0 {
			t.Fatalf("a failed restore left %v beside its destination", left)
		}
		return
	}
	data, rerr := os.ReadFile(dest)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if clean, ok := h.states[res.Seq]; !ok || sha256.Sum256(data) != clean {
		t.Fatalf("restore to %s reports seq %d and returned a database that is not the clean state at that seq", d.target, res.Seq)
	}
	sum, _, cerr := frames.DatabaseChecksum(bytes.NewReader(data), historyPageSize)
	if int64(len(data)) != res.Bytes || cerr != nil || sum != res.Checksum {
		t.Fatalf("restored %d bytes with checksum %s (%v), the result says %d bytes, %s",
			len(data), sum, cerr, res.Bytes, res.Checksum)
	}
	switch {
	case res.Seq > want:
		t.Fatalf("restore to %s reached seq %d, past %d", d.target, res.Seq, want)
	case res.Seq < want && (d.nothingLost(h) || d.recordsEnd(h)):
		t.Fatalf("restore to %s returned the state at seq %d without an error, want seq %d", d.target, res.Seq, want)
	case res.Seq < want:
		// The tail is gone, or restore passed over an object it should
		// have applied or failed on.
		if k, ok := d.past(res.Epoch, res.Seq, want); ok {
			t.Fatalf("restore to %s stopped at seq %d of session %d without an error, but %s is in the bucket",
				d.target, res.Seq, res.Epoch, k)
		}
	}
}

func (h *history) checkVerify(t *testing.T, d *damaged, rep restore.Report, err, restoreErr error) {
	t.Helper()
	if err != nil {
		t.Fatalf("verify failed instead of reporting: %v", err)
	}
	if rep.Damaged() != (rep.Err() != nil) || rep.Err() != nil && !errors.Is(rep.Err(), restore.ErrDamage) {
		t.Fatalf("Report.Err is %v, Damaged %v", rep.Err(), rep.Damaged())
	}
	if d.intact(h) && (rep.Damaged() || rep.Seq != h.latest) {
		t.Fatalf("the clean bucket verifies to frame %d with %v", rep.Seq, rep.Problems)
	}
	if restoreErr != nil && !d.toSeq && !rep.Damaged() {
		t.Fatalf("restore failed (%v), verification found no damage: %v", restoreErr, rep.Problems)
	}
	named := map[string]bool{}
	for _, p := range rep.Problems {
		if p.Severity == restore.Damage {
			named[p.Key] = true
		}
	}
	for _, k := range d.visiblyDamaged(h) {
		if !named[k] {
			t.Fatalf("%s is damaged, verification does not name it: %v", k, rep.Problems)
		}
	}
}

// fuzzBucket is the directory bucket the executions of one process share.
// Each execution makes it hold its program's objects, writing and deleting
// only what differs from the previous execution's: rewriting every object
// each time was an eighth of an execution.
type fuzzBucket struct {
	dir  *bucket.Dir
	held map[string][]byte // what it holds
}

func newFuzzBucket(f *testing.F, root string) *fuzzBucket {
	if err := os.Mkdir(root, 0o755); err != nil {
		f.Fatal(err)
	}
	b, err := bucket.NewDir(root)
	if err != nil {
		f.Fatal(err)
	}
	return &fuzzBucket{dir: b, held: map[string][]byte{}}
}

// hold makes the bucket hold exactly objects.
func (b *fuzzBucket) hold(t *testing.T, objects map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	for k := range b.held {
		if _, ok := objects[k]; !ok {
			if err := b.dir.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(b.held, k)
		}
	}
	for k, data := range objects {
		if held, ok := b.held[k]; ok && bytes.Equal(held, data) {
			continue
		}
		if _, err := b.dir.Put(ctx, k, bytes.NewReader(data), int64(len(data)), bucket.Condition{}); err != nil {
			t.Fatal(err)
		}
		b.held[k] = data
	}
}

// fuzzScratch is where executions put their buckets and restores: tmpfs
// when the machine has one, since every execution creates a few dozen
// files and the directory bucket syncs each.
func fuzzScratch(f *testing.F) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "framectl-fuzz-"); err == nil {
			f.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return f.TempDir()
}

// seeds are programs the fuzzer starts from: the clean bucket, and each
// kind of mutation on each object.
func (h *history) seeds() [][]byte {
	seeds := [][]byte{nil, {opTarget, byte(h.sessionStart + 1)}}
	for i := range h.keys {
		o := byte(i)
		seeds = append(seeds,
			[]byte{opFlip, o, 0, 40, 0x01},
			[]byte{opCut, o, 0, 30},
			[]byte{opDrop, o},
			[]byte{opCopy, o, o + 3},
			[]byte{opSwap, o, o + 1},
			[]byte{opReseal, o, 0, 60, 0x80},
			[]byte{opReseal, o, 0, 8, 0x04, opTarget, byte(h.latest - 1)},
		)
	}
	seeds = append(seeds, []byte{opGarbage, 5, 16, 'n', 'o', 't', ' ', 'a', ' ', 'b', 'a', 't', 'c', 'h'})
	return seeds
}
