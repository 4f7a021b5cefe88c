package session

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// rewrittenRows creates the table of 20 rows of 3000 random bytes that
// rewriteRows rewrites: a log that outgrows the database in a few rounds.
const rewrittenRows = "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB); INSERT INTO t SELECT value, randomblob(3000) FROM generate_series(1, 20)"

// rewriteRows rewrites a quarter of rewrittenRows' rows (round i of four)
// and waits until that is durable.
func rewriteRows(t testing.TB, db *DB, c *sqlite3.Conn, i int) {
	t.Helper()
	dbtest.Exec(t, c, fmt.Sprintf("UPDATE t SET v = randomblob(3000) WHERE id %% 4 = %d", i%4))
	require.NoError(t, db.Durable(t.Context()))
}

// The replicator compacts its own actor in the background once the log
// reaches the database's size: a newer snapshot appears, the batches it
// covers go, and the actor still restores to exactly the database.
func TestBackgroundCompaction(t *testing.T) {
	b := buckettest.Dir(t)
	cfg := replTestConfig(t, b)
	cfg.DisableCompaction = false
	// The database is tiny: the size rule without the bounds meant for a
	// small hot database (TestBackgroundCompactionBounded).
	cfg.Compaction = compact.Rule{MinLogBytes: -1, MinInterval: -1}
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, rewrittenRows)
	// Rewrite the rows again and again: the log grows past the database.
	for i := range 40 {
		rewriteRows(t, db, c, i)
	}
	// Wait for a pass to finish: a newer snapshot, and none of the batches
	// it covers left (a pass uploads the snapshot, then deletes).
	var newest frames.Seq
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		inv, err := restore.Take(t.Context(), b, db.actor)
		require.NoError(t, err)
		s, _ := inv.Session(cfg.Epoch)
		newest = s.Snapshots[len(s.Snapshots)-1].Seq
		covered := 0
		for _, o := range s.Batches {
			if o.Seq <= newest {
				covered++
			}
		}
		if newest > 0 && covered == 0 && len(s.Snapshots) == 1 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no finished compaction after 30 s: newest snapshot at %d, %d snapshots, %d covered batches kept, stats %+v",
				newest, len(s.Snapshots), covered, db.Stats())
		}
	}
	st := db.Stats()
	if st.Compactions == 0 || st.CompactionErrors != 0 {
		t.Fatalf("compactions %d, errors %d", st.Compactions, st.CompactionErrors)
	}
	want := checkpointed(t, c, db.Path())
	out := t.TempDir() + "/restored.db"
	res, err := restore.Restore(t.Context(), b, db.actor, out, restore.Options{})
	require.NoError(t, err)
	dbtest.SameBytes(t, "restored vs database", dbtest.FileBytes(t, out), want)
	t.Logf("%d compaction passes; newest snapshot at %d; restore read %d objects to frame %d", st.Compactions, newest, res.ObjectsFetched, res.Seq)
}

// TestBackgroundCompactionBounded: the same workload with the default
// Config.Compaction runs no pass past the session's first (its tier pass):
// a log of 600 KB over a database of 60 KB is past the size rule but short
// of the minimum log (compact.DefaultMinLogBytes), so a small database
// rewritten again and again is not compacted after every batch, and the
// writer's configuration reaches the trigger. A rule of a lower minimum,
// configured, compacts the same log.
func TestBackgroundCompactionBounded(t *testing.T) {
	for _, c := range []struct {
		name   string
		rule   compact.Rule
		passes func(int64) bool
	}{
		{"default", compact.Rule{}, func(n int64) bool { return n == 1 }},
		{"minimum log 100 KB", compact.Rule{MinLogBytes: 100_000, MinInterval: -1}, func(n int64) bool { return n > 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := buckettest.Dir(t)
			cfg := replTestConfig(t, b)
			cfg.DisableCompaction = false
			cfg.Compaction = c.rule
			db := replOpen(t, cfg)
			conn := replConn(t, db)
			dbtest.Exec(t, conn, rewrittenRows)
			for i := range 40 {
				rewriteRows(t, db, conn, i)
			}
			st := db.Stats()
			require.NoError(t, conn.Close())
			require.NoError(t, db.Close(t.Context())) // waits for a running pass
			passes := db.Stats().Compactions
			t.Logf("%d compaction passes over %d bytes of log", passes, st.BytesUploaded)
			if !c.passes(passes) {
				t.Fatalf("%d compaction passes over %d bytes of log", passes, st.BytesUploaded)
			}
		})
	}
}

// snapshotPuts counts the PUTs of snapshot keys.
type snapshotPuts struct {
	bucket.Bucket
	n atomic.Int64
}

func (p *snapshotPuts) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if k, err := frames.ParseKey(key); err == nil && k.Kind == frames.KeySnapshot {
		p.n.Add(1)
	}
	return p.Bucket.Put(ctx, key, body, size, cond)
}

// A database rewritten whole between passes replaces every chunk at each
// pass. The writer's passes are its session's owner's (compact.Owner,
// told of the session's first manifest): the chunks it put that no
// manifest names any more go at the next pass, not after the hour's grace,
// so the bucket holds the newest manifest's chunks and at most two
// manifests' worth more, however many passes ran: the chunks of the
// manifest the last pass deleted (the next pass collects them) and those a
// pass cut short by Close had put (nothing names them; the grace keeps
// them).
func TestBackgroundCompactionCollectsReplacedChunks(t *testing.T) {
	b := buckettest.Dir(t)
	puts := &snapshotPuts{Bucket: b}
	cfg := replTestConfig(t, puts)
	cfg.DisableCompaction = false
	cfg.KeptBytes = -1 // the bucket alone: what is collected shows there
	cfg.Compaction = compact.Rule{MinLogBytes: -1, MinInterval: -1}
	db := replOpen(t, cfg)
	c := replConn(t, db)
	// About 600 KB: three chunks of 256 KiB.
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB); INSERT INTO t SELECT value, randomblob(900) FROM generate_series(1, 600)")
	require.NoError(t, db.Durable(t.Context()))
	for i := 0; puts.n.Load() < 8; i++ {
		dbtest.Exec(t, c, "UPDATE t SET v = randomblob(900)")
		require.NoError(t, db.Durable(t.Context()))
		if i > 2000 {
			t.Fatalf("only %d snapshots after %d rewrites; stats %+v", puts.n.Load(), i, db.Stats())
		}
	}
	want := checkpointed(t, c, db.Path())
	c.Close()
	require.NoError(t, db.Close(t.Context())) // waits for the pass running

	inv, err := restore.Take(t.Context(), b, db.actor)
	require.NoError(t, err)
	named := map[frames.ChunkHash]bool{}
	perManifest := 0
	for _, s := range inv.Sessions {
		for _, o := range s.Snapshots {
			m := buckettest.Manifest(t, b, o.Key)
			for _, l := range m.Lanes {
				perManifest = max(perManifest, len(l.Chunks))
				for _, ch := range l.Chunks {
					named[ch.Hash] = true
				}
			}
		}
	}
	unnamed := 0
	for _, ch := range inv.Chunks {
		if !named[ch.Hash] {
			unnamed++
		}
	}
	t.Logf("%d snapshots written, %d passes; %d chunks listed, %d named, %d per manifest",
		puts.n.Load(), db.Stats().Compactions, len(inv.Chunks), len(named), perManifest)
	require.LessOrEqual(t, unnamed, 2*perManifest, "chunks no manifest names after %d snapshots", puts.n.Load())

	out := t.TempDir() + "/restored.db"
	_, err = restore.Restore(t.Context(), b, db.actor, out, restore.Options{})
	require.NoError(t, err)
	dbtest.SameBytes(t, "restored vs database", dbtest.FileBytes(t, out), want)
}
