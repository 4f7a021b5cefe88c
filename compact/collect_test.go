package compact_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
)

// namedChunks returns the keys of the chunks the actor's snapshots name,
// reading every snapshot in the bucket.
func namedChunks(t *testing.T, b bucket.Bucket, a frames.Actor) map[string]bool {
	t.Helper()
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	named := map[string]bool{}
	for _, s := range inv.Sessions {
		for _, o := range s.Snapshots {
			m := buckettest.Snapshot(t, b, o.Key)
			if m == nil {
				continue
			}
			for _, l := range m.Lanes {
				for _, c := range l.Chunks {
					named[a.ChunkKey(c.Hash)] = true
				}
			}
		}
	}
	return named
}

// unnamedChunks lists the actor's chunks no snapshot names.
func unnamedChunks(t *testing.T, b bucket.Bucket, a frames.Actor) []string {
	t.Helper()
	named := namedChunks(t, b, a)
	var out []string
	for _, k := range buckettest.Keys(t, b, a.ChunkPrefix()) {
		if !named[k] {
			out = append(out, k)
		}
	}
	return out
}

// requireNamedPresent fails unless every chunk a snapshot names exists.
func requireNamedPresent(t *testing.T, b bucket.Bucket, a frames.Actor, when string) {
	t.Helper()
	have := map[string]bool{}
	for _, k := range buckettest.Keys(t, b, a.ChunkPrefix()) {
		have[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(namedChunks(t, b, a))) {
		if !have[k] {
			t.Fatalf("%s: chunk %s is named by a snapshot but missing", when, k)
		}
	}
}

// verifyClean verifies the actor and fails on damage; it returns the
// warnings about chunks.
func verifyClean(t *testing.T, b bucket.Bucket, a frames.Actor, when string) []restore.Problem {
	t.Helper()
	rep, err := restore.Verify(t.Context(), b, a, restore.VerifyOptions{ScratchDir: t.TempDir()})
	require.NoError(t, err, when)
	require.False(t, rep.Damaged(), "%s: %v", when, rep.Problems)
	var out []restore.Problem
	for _, p := range rep.Problems {
		if k, err := frames.ParseKey(p.Key); err == nil && k.Kind == frames.KeyChunk {
			out = append(out, p)
		}
	}
	return out
}

// restoreLatest restores the actor and returns the database bytes.
func restoreLatest(t *testing.T, b bucket.Bucket, a frames.Actor) ([]byte, restore.Result) {
	t.Helper()
	dest := t.TempDir() + "/restored.db"
	res, err := restore.Restore(t.Context(), b, a, dest, restore.Options{})
	require.NoError(t, err)
	data, err := os.ReadFile(dest)
	require.NoError(t, err)
	return data, res
}

// isSnapshotKey matches the keys of snapshots and manifests.
func isSnapshotKey(key string) bool {
	k, err := frames.ParseKey(key)
	return err == nil && k.Kind == frames.KeySnapshot
}

// TestCollectChunks: the chunks a compaction replaced stay while younger
// than the grace (the pass counts them kept) and go in the first pass
// after: exactly the chunks no snapshot names, with their bytes counted.
// What is left restores, and verify finds neither damage nor strays.
func TestCollectChunks(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := bigSession(t, b)
			a := d.actor
			opts := testOptions(t)
			opts.Force = true
			for range 2 {
				d.exec("UPDATE t SET b = randomblob(900)") // every chunk changes
				d.durable()
				res := mustCompact(t, b, a, opts)
				require.NotEmpty(t, res.Snapshot)
				require.Zero(t, res.ChunksDeleted, "young chunks deleted")
			}
			img := d.image()
			orphans := unnamedChunks(t, b, a)
			require.GreaterOrEqual(t, len(orphans), 16, "chunks of the two manifests compaction replaced")
			var orphanBytes int64
			for _, k := range orphans {
				info, err := b.Stat(t.Context(), k)
				require.NoError(t, err)
				orphanBytes += info.Size
			}

			opts.Force = false
			res := mustCompact(t, b, a, opts)
			if res.ChunksDeleted != 0 || res.ChunksKeptByGrace != len(orphans) {
				t.Fatalf("within the grace: deleted %d, kept %d; want none deleted, %d kept", res.ChunksDeleted, res.ChunksKeptByGrace, len(orphans))
			}
			require.Empty(t, res.CollectSkipped)

			clock := buckettest.NewClock(time.Now().Add(compact.DefaultGrace + time.Minute))
			opts.Now = clock.Now
			res = mustCompact(t, b, a, opts)
			if res.ChunksDeleted != len(orphans) || res.ChunkBytesDeleted != orphanBytes || res.ChunksKeptByGrace != 0 {
				t.Fatalf("after the grace: deleted %d (%d bytes), kept %d; want %d deleted (%d bytes)",
					res.ChunksDeleted, res.ChunkBytesDeleted, res.ChunksKeptByGrace, len(orphans), orphanBytes)
			}
			require.Empty(t, unnamedChunks(t, b, a), "chunks left that nothing names")
			requireNamedPresent(t, b, a, "after collecting")
			require.Empty(t, verifyClean(t, b, a, "after collecting"), "chunk warnings")
			got, _ := restoreLatest(t, b, a)
			dbtest.SameBytes(t, "restored after collecting", got, img)

			res = mustCompact(t, b, a, opts)
			require.Zero(t, res.ChunksDeleted+res.ChunksKeptByGrace, "a second collection")
		})
	}
}

// TestCollectBesideCompactionInFlight: a compaction whose chunks are
// uploaded but whose manifest is not yet (held at a gate) loses none of
// them to a collector running meanwhile: they are younger than the grace.
// Once its manifest lands, a collection after the grace deletes the chunks
// of the manifests it replaced and keeps its own.
func TestCollectBesideCompactionInFlight(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := bigSession(t, b)
			a := d.actor
			d.exec("UPDATE t SET b = randomblob(900) WHERE id <= 600") // a quarter of the pages
			last := d.durable()
			img := d.image()
			before := buckettest.Keys(t, b, a.ChunkPrefix())

			g := buckettest.NewGate(b, isSnapshotKey)
			g.Hold()
			type outcome struct {
				res compact.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				opts := testOptions(t)
				opts.Force = true
				res, err := compact.Actor(t.Context(), g, a, opts)
				done <- outcome{res, err}
			}()
			select {
			case <-g.Waiting():
			case o := <-done:
				t.Fatalf("the compaction ended before its manifest upload: %+v, %v", o.res, o.err)
			}
			var inFlight []string
			for _, k := range buckettest.Keys(t, b, a.ChunkPrefix()) {
				if !slices.Contains(before, k) {
					inFlight = append(inFlight, k)
				}
			}
			require.NotEmpty(t, inFlight, "chunks the held compaction uploaded")

			res := mustCompact(t, b, a, testOptions(t))
			require.False(t, res.Due, "the collector wrote a snapshot of its own")
			if res.ChunksDeleted != 0 || res.ChunksKeptByGrace < len(inFlight) {
				t.Fatalf("collector beside the compaction in flight: deleted %d, kept %d; want none deleted, at least %d kept",
					res.ChunksDeleted, res.ChunksKeptByGrace, len(inFlight))
			}
			for _, k := range inFlight {
				_, err := b.Stat(t.Context(), k)
				require.NoError(t, err, "chunk %s of the compaction in flight", k)
			}

			g.Release()
			o := <-done
			require.NoError(t, o.err)
			require.Equal(t, a.SnapshotKey(2, last), o.res.Snapshot)
			requireNamedPresent(t, b, a, "once the manifest landed")
			orphans := unnamedChunks(t, b, a)
			require.NotEmpty(t, orphans, "chunks of the manifest the compaction replaced")

			opts := testOptions(t)
			opts.Now = buckettest.NewClock(time.Now().Add(compact.DefaultGrace + time.Minute)).Now
			res = mustCompact(t, b, a, opts)
			require.Equal(t, len(orphans), res.ChunksDeleted, "deleted after the grace")
			requireNamedPresent(t, b, a, "after collecting")
			for _, k := range inFlight {
				_, err := b.Stat(t.Context(), k)
				require.NoError(t, err, "chunk %s of the landed manifest", k)
			}
			require.Empty(t, verifyClean(t, b, a, "after collecting"))
			got, _ := restoreLatest(t, b, a)
			dbtest.SameBytes(t, "restored", got, img)
		})
	}
}

// listGate wraps a bucket and holds the first listing of prefix until
// released, after signalling that it waits: a pass is held between its
// read of own.json and its listing.
type listGate struct {
	bucket.Bucket
	prefix  string
	once    sync.Once
	waiting chan struct{}
	release chan struct{}
}

func (g *listGate) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	if prefix == g.prefix {
		g.once.Do(func() {
			close(g.waiting)
			select {
			case <-g.release:
			case <-ctx.Done():
			}
		})
	}
	return g.Bucket.List(ctx, prefix, startAfter, limit)
}

// TestCollectBesideWakingWriter: a writer waking (session.Open of session 3
// from an empty directory) restores the newest manifest of session 2 and
// names its chunks in its own first manifest, which is held at a gate.
// Meanwhile that manifest is deleted (by hand here: by anyone whose view
// is older than the claim), and collectors run with a clock past the
// grace: every chunk of the deleted manifest is old and named by no
// manifest in the bucket. None is collected:
//
//   - a pass that reads own.json after the claim finds the current session
//     without a snapshot and collects nothing;
//   - a pass that read own.json before the claim (held at its listing
//     meanwhile) reads it again before deleting, finds the claim, and
//     collects nothing.
//
// Once the manifest lands the actor restores, verify finds no damage, and
// a later collection deletes only what nothing names.
func TestCollectBesideWakingWriter(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := bigSession(t, b)
			a := d.actor
			// Session 2 gets two manifests, both kept (retention), so that
			// deleting the newest still leaves one for a stale pass.
			d.exec("UPDATE t SET b = randomblob(900) WHERE id <= 600")
			d.durable()
			keep := testOptions(t)
			keep.Force, keep.Retention = true, time.Hour
			res := mustCompact(t, b, a, keep)
			newest := res.Snapshot
			require.NotEmpty(t, newest)
			img := d.image()
			d.close()
			m := buckettest.Manifest(t, b, newest)
			var named []string
			for _, c := range m.Lanes[0].Chunks {
				named = append(named, a.ChunkKey(c.Hash))
			}

			// A stale pass: own.json read (session 2, released), held at
			// its listing until after the claim.
			lg := &listGate{Bucket: b, prefix: a.Prefix(), waiting: make(chan struct{}), release: make(chan struct{})}
			late := buckettest.NewClock(time.Now().Add(compact.DefaultGrace + time.Minute))
			staleDone := make(chan compact.Result, 1)
			go func() {
				opts := testOptions(t)
				opts.Now = late.Now
				res, err := compact.Actor(t.Context(), lg, a, opts)
				if err != nil {
					t.Errorf("the stale pass: %v", err)
				}
				staleDone <- res
			}()
			<-lg.waiting

			g := buckettest.NewGate(b, func(k string) bool { return strings.HasPrefix(k, a.SnapshotSessionPrefix(3)) })
			g.Hold()
			cfg := d.cfg
			cfg.Bucket, cfg.Epoch, cfg.Dir = g, 3, t.TempDir()
			opened := make(chan error, 1)
			var db3 *framectl.DB
			go func() {
				var err error
				db3, err = framectl.Open(t.Context(), cfg)
				opened <- err
			}()
			select {
			case <-g.Waiting():
			case err := <-opened:
				t.Fatalf("session 3 opened without uploading its manifest: %v", err)
			}
			require.NoError(t, b.Delete(t.Context(), newest))

			opts := testOptions(t)
			opts.Now = late.Now
			res = mustCompact(t, b, a, opts)
			if res.Epoch != 3 || res.ChunksDeleted != 0 || len(res.Deleted) != 0 {
				t.Fatalf("pass during the claim: session %d, deleted %v and %d chunks; want session 3, nothing deleted",
					res.Epoch, res.Deleted, res.ChunksDeleted)
			}
			close(lg.release)
			stale := <-staleDone
			if stale.Epoch != 2 || stale.ChunksDeleted != 0 || stale.CollectSkipped == "" {
				t.Fatalf("stale pass: session %d, %d chunks deleted, skipped %q; want session 2, none deleted, a reason",
					stale.Epoch, stale.ChunksDeleted, stale.CollectSkipped)
			}
			for _, k := range named {
				_, err := b.Stat(t.Context(), k)
				require.NoError(t, err, "chunk %s of the manifest the writer read", k)
			}

			g.Release()
			require.NoError(t, <-opened)
			t.Cleanup(func() { db3.Close(context.Background()) })
			requireNamedPresent(t, b, a, "once session 3 started")
			verifyClean(t, b, a, "once session 3 started")
			got, rr := restoreLatest(t, b, a)
			require.Equal(t, frames.Epoch(3), rr.Epoch)
			dbtest.SameBytes(t, "restored from session 3", got, img)

			// The first pass deletes session 2 and keeps what its manifests
			// named (it listed them); the second collects it.
			collected := 0
			for range 2 {
				res = mustCompact(t, b, a, opts)
				collected += res.ChunksDeleted
			}
			require.Positive(t, collected, "chunks only session 2's manifests named")
			require.Empty(t, unnamedChunks(t, b, a))
			requireNamedPresent(t, b, a, "after collecting")
			got, _ = restoreLatest(t, b, a)
			dbtest.SameBytes(t, "restored after collecting", got, img)
		})
	}
}

// statHook wraps a bucket and runs before once, just before the first
// Stat of key.
type statHook struct {
	bucket.Bucket
	key    string
	once   sync.Once
	before func()
}

func (h *statHook) Stat(ctx context.Context, key string) (bucket.Info, error) {
	if key == h.key {
		h.once.Do(h.before)
	}
	return h.Bucket.Stat(ctx, key)
}

// TestCollectorsAtOnce: two collectors delete the same old chunks at once;
// both succeed, together they delete exactly the chunks nothing names, and
// the actor restores. Then a chunk put again by a writer (same content,
// for a manifest in flight) after a collector listed it as old is kept:
// the collector's Stat just before the delete sees the new object.
func TestCollectorsAtOnce(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := bigSession(t, b)
			a := d.actor
			orphaned := func() []string {
				t.Helper()
				opts := testOptions(t)
				opts.Force = true
				for range 2 {
					d.exec("UPDATE t SET b = randomblob(900)")
					d.durable()
					mustCompact(t, b, a, opts)
				}
				orphans := unnamedChunks(t, b, a)
				require.NotEmpty(t, orphans)
				return orphans
			}
			late := testOptions(t)
			late.Now = buckettest.NewClock(time.Now().Add(compact.DefaultGrace + time.Minute)).Now

			orphans := orphaned()
			var wg sync.WaitGroup
			results := make([]compact.Result, 2)
			for i := range results {
				wg.Go(func() {
					res, err := compact.Actor(t.Context(), b, a, late)
					if err != nil {
						t.Errorf("collector %d: %v", i, err)
					}
					results[i] = res
				})
			}
			wg.Wait()
			n0, n1 := results[0].ChunksDeleted, results[1].ChunksDeleted
			if n0+n1 < len(orphans) || n0 > len(orphans) || n1 > len(orphans) {
				t.Fatalf("collectors at once deleted %d and %d chunks of %d old ones", n0, n1, len(orphans))
			}
			require.Empty(t, unnamedChunks(t, b, a), "chunks left that nothing names")
			requireNamedPresent(t, b, a, "after two collectors")
			got, _ := restoreLatest(t, b, a)
			dbtest.SameBytes(t, "restored after two collectors", got, d.image())

			// One orphan is put again by a "writer" between the listing and
			// the collector's check of it: it must stay.
			orphans = orphaned()
			again := orphans[0]
			data, _, err := bucket.ReadAll(t.Context(), b, again, 1<<30)
			require.NoError(t, err)
			listed, err := b.Stat(t.Context(), again)
			require.NoError(t, err)
			hooked := &statHook{Bucket: b, key: again, before: func() {
				// S3 answers a Stat with times to the second: put it
				// again in a later second than the listed one (with a
				// second to spare for the server's own stamp).
				for !time.Now().Truncate(time.Second).After(listed.ModTime.Add(time.Second)) {
					time.Sleep(10 * time.Millisecond)
				}
				_, err := b.Put(context.Background(), again, bytes.NewReader(data), int64(len(data)), bucket.Condition{})
				if err != nil {
					t.Errorf("putting %s again: %v", again, err)
				}
			}}
			res := mustCompact(t, hooked, a, late)
			if res.ChunksDeleted != len(orphans)-1 || res.ChunksKeptByGrace != 1 {
				t.Fatalf("collector beside a chunk put again: deleted %d, kept %d; want %d deleted, 1 kept", res.ChunksDeleted, res.ChunksKeptByGrace, len(orphans)-1)
			}
			require.Equal(t, []string{again}, unnamedChunks(t, b, a), "chunks left that nothing names: the one put again")
			requireNamedPresent(t, b, a, "after collecting beside a chunk put again")
		})
	}
}

// TestCollectBesideZombie: the owner of session 1 goes on after session 2
// took over (no fence stops it here): it uploads batches and then a
// manifest of its own state, whose chunks are uploaded first and whose
// manifest is held. A collector keeps those chunks while young; the tier
// pass deletes the zombie's objects; once they are older than the grace
// the chunks only the zombie named go, every chunk session 2 names stays,
// and session 2 restores to its own state, never the zombie's.
func TestCollectBesideZombie(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			id := newActorID()
			z := openDB(t, b, t.TempDir(), id, 1)
			a := z.actor
			z.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
			z.exec("INSERT INTO t(b) SELECT randomblob(900) FROM generate_series(1, 1500)")
			z.durable()

			d := openDB(t, b, t.TempDir(), id, 2) // restores session 1, continues it
			d.exec("UPDATE t SET b = randomblob(900) WHERE id <= 100")
			last := d.durable()
			img := d.image()

			z.exec("UPDATE t SET b = randomblob(900) WHERE id > 750") // the zombie's own pages
			zseq := z.durable()
			before := buckettest.Keys(t, b, a.ChunkPrefix())
			g := buckettest.NewGate(b, isSnapshotKey)
			g.Hold()
			zdone := make(chan error, 1)
			go func() { zdone <- zombieManifest(t, g, a, z, zseq) }()
			select {
			case <-g.Waiting():
			case err := <-zdone:
				t.Fatalf("the zombie's manifest went through: %v", err)
			}
			var zombieChunks []string
			for _, k := range buckettest.Keys(t, b, a.ChunkPrefix()) {
				if !slices.Contains(before, k) {
					zombieChunks = append(zombieChunks, k)
				}
			}
			require.NotEmpty(t, zombieChunks)

			res := mustCompact(t, b, a, testOptions(t))
			require.Equal(t, frames.Epoch(2), res.Epoch)
			require.Zero(t, res.ChunksDeleted, "chunks deleted within the grace")
			require.GreaterOrEqual(t, res.ChunksKeptByGrace, len(zombieChunks))
			g.Release()
			require.NoError(t, <-zdone)

			res = mustCompact(t, b, a, testOptions(t))
			require.Contains(t, res.Deleted, a.SnapshotKey(1, zseq), "the tier pass deletes the zombie's manifest")
			opts := testOptions(t)
			opts.Now = buckettest.NewClock(time.Now().Add(compact.DefaultGrace + time.Minute)).Now
			res = mustCompact(t, b, a, opts)
			require.GreaterOrEqual(t, res.ChunksDeleted, len(zombieChunks), "the zombie's chunks, and session 1's replaced ones")
			require.Empty(t, unnamedChunks(t, b, a))
			requireNamedPresent(t, b, a, "after collecting")
			require.Empty(t, verifyClean(t, b, a, "after collecting"))
			got, rr := restoreLatest(t, b, a)
			require.Equal(t, last, rr.Seq)
			dbtest.SameBytes(t, "restored", got, img)
		})
	}
}

// zombieManifest uploads, as the zombie's compaction would, a manifest of
// its database at seq in session 1: every chunk first, then the manifest.
func zombieManifest(t *testing.T, b bucket.Bucket, a frames.Actor, z *testDB, seq frames.Seq) error {
	data := z.image()
	path := t.TempDir() + "/zombie.db"
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr, err := lanes.TrackFile(t.Context(), f, uint32(dbtest.PageSize(data)))
	if err != nil {
		return err
	}
	_, err = chunks.Write(t.Context(), b, a, frames.Manifest{Epoch: 1, Seq: seq},
		[]lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: tr, File: f}}, nil, chunks.Options{})
	return err
}

// TestCollectManyChunks: more than a listing page of chunks nothing names
// (1,100, as a writer whose manifests never landed would leave) all go in
// one pass after the grace; the chunks the actor's manifests name stay.
func TestCollectManyChunks(t *testing.T) {
	const strays = 1100
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := newDB(t, b)
			a := d.actor
			d.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
			d.exec("INSERT INTO t(b) SELECT randomblob(900) FROM generate_series(1, 400)")
			d.durable()
			img := d.image()
			mustCompact(t, b, a, testOptions(t)) // the log is due: a manifest of the rows
			orphans := unnamedChunks(t, b, a)    // the replaced first manifest's
			live := buckettest.Keys(t, b, a.ChunkPrefix())
			var wg sync.WaitGroup
			work := make(chan int)
			for range 8 {
				wg.Go(func() {
					for i := range work {
						var buf bytes.Buffer
						h, _, err := frames.WriteChunk(&buf, []byte(fmt.Sprintf("%0512d", i)), frames.WriteOptions{})
						if err == nil {
							_, err = b.Put(t.Context(), a.ChunkKey(h.Hash), &buf, int64(buf.Len()), bucket.Condition{})
						}
						if err != nil {
							t.Errorf("stray chunk %d: %v", i, err)
						}
					}
				})
			}
			for i := range strays {
				work <- i
			}
			close(work)
			wg.Wait()
			require.Len(t, buckettest.Keys(t, b, a.ChunkPrefix()), strays+len(live))

			opts := testOptions(t)
			opts.Now = buckettest.NewClock(time.Now().Add(compact.DefaultGrace + time.Minute)).Now
			res := mustCompact(t, b, a, opts)
			require.Equal(t, strays+len(orphans), res.ChunksDeleted)
			require.Equal(t, slices.Sorted(maps.Keys(namedChunks(t, b, a))), buckettest.Keys(t, b, a.ChunkPrefix()), "chunks left: those the manifests name")
			got, _ := restoreLatest(t, b, a)
			dbtest.SameBytes(t, "restored", got, img)
		})
	}
}
