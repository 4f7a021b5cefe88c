package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
)

// crash stops a database as a killed process would: no flush, no final
// state, no release; connections are left to the caller (closing them
// checkpoints the WAL, which changes nothing the next Open sees).
func (db *DB) crash() {
	db.closeOnce.Do(func() {
		db.rep.stop(errors.New("crashed"))
		<-db.rep.done
		db.detach()
		db.rep.stopCompaction()
		db.rep.state.close()
		db.closeErr = errors.New("crashed")
	})
}

// insertRows commits rows from..to, one commit each.
func insertRows(t testing.TB, c *sqlite3.Conn, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		dbtest.Exec(t, c, fmt.Sprintf("INSERT INTO t VALUES(%d, randomblob(300))", i))
	}
}

// createRows creates table t and commits rows 1..n, one commit each.
func createRows(t testing.TB, c *sqlite3.Conn, n int) {
	t.Helper()
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
	insertRows(t, c, 1, n)
}

// closeDB closes the connection c, then db, which must close cleanly.
func closeDB(t testing.TB, db *DB, c *sqlite3.Conn) {
	t.Helper()
	c.Close()
	require.NoError(t, db.Close(t.Context()))
}

func countRows(t testing.TB, c *sqlite3.Conn) int {
	t.Helper()
	n, err := strconv.Atoi(dbtest.Query1(t, c, "SELECT count(*) FROM t"))
	require.NoError(t, err)
	return n
}

// reopen opens cfg again at epoch, on the same directory.
func reopen(t testing.TB, cfg Config, epoch frames.Epoch) (*DB, *sqlite3.Conn) {
	t.Helper()
	cfg.Epoch = epoch
	db := replOpen(t, cfg)
	return db, replConn(t, db)
}

// Close, then Open on the same directory: the local copy is current and
// none of the database is downloaded (no batch, no chunk; the newest
// manifest is read, to know which chunks the bucket holds), and the new
// session's first manifest uploads no chunk.
func TestReopenReusesLocalCopy(t *testing.T) {
	counting := &getCounter{Bucket: buckettest.Dir(t)}
	cfg := replTestConfig(t, counting)
	db, c := reopen(t, cfg, 1)
	createRows(t, c, 50)
	closeDB(t, db, c)
	data, snaps := counting.data.Load(), counting.snapshots.Load()
	db2, c2 := reopen(t, cfg, 2)
	st := db2.Stats().Start
	assert.Equal(t, StartReused, st.From, "reopen after Close started")
	if n := counting.data.Load() - data; n != 0 {
		t.Errorf("reopen of a current local copy downloaded %d batches or chunks", n)
	}
	if n := counting.snapshots.Load() - snaps; n > 1 {
		t.Errorf("reopen of a current local copy read %d snapshots, want the newest manifest only", n)
	}
	// The rows were written after session 1's manifest: their chunk is new.
	assert.Equal(t, 1, st.ChunksUploaded, "chunks uploaded by the wake after the inserts")
	if n := countRows(t, c2); n != 50 {
		t.Errorf("%d rows after reopen, want 50", n)
	}
	closeDB(t, db2, c2)

	// Nothing written since session 2's manifest: the manifest alone.
	db3, _ := reopen(t, cfg, 3)
	st = db3.Stats().Start
	assert.Equal(t, StartReused, st.From)
	assert.Equal(t, 0, st.ChunksUploaded, "chunks uploaded by a wake that changed nothing")
	assert.Equal(t, 1, st.ChunksShared)
	if st.SnapshotBytes <= 0 || st.SnapshotBytes > 1<<10 {
		t.Errorf("a wake that changed nothing uploaded %d bytes, want the manifest's few hundred", st.SnapshotBytes)
	}
}

// getCounter counts Gets of the database's data, batches and chunks, and
// of snapshots (manifests or full), not own.json.
type getCounter struct {
	bucket.Bucket
	data, snapshots atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if k, err := frames.ParseKey(key); err == nil {
		switch k.Kind {
		case frames.KeyLog, frames.KeyChunk:
			g.data.Add(1)
		case frames.KeySnapshot:
			g.snapshots.Add(1)
		}
	}
	return g.Bucket.Get(ctx, key)
}

// A listing that lags behind the bucket must never make Open restore an
// older state over a newer local copy: it waits for the listing, or fails
// and leaves the local copy alone.
func TestReopenWithLaggingListing(t *testing.T) {
	const lag = 700 * time.Millisecond
	lagging := buckettest.NewFaulty(buckettest.Dir(t), buckettest.FaultConfig{Lag: lag})
	cfg := replTestConfig(t, lagging)
	db, c := reopen(t, cfg, 1)
	createRows(t, c, 200)
	require.NoError(t, db.Durable(t.Context()))
	closeDB(t, db, c)
	t.Run("fails rather than go back", func(t *testing.T) {
		short := cfg
		short.Epoch, short.ListingWait = 2, 50*time.Millisecond
		before := dbtest.FileBytes(t, filepath.Join(cfg.Dir, databaseFile))
		_, err := openDB(t.Context(), short)
		require.ErrorIs(t, err, ErrListingBehind, "open with a listing %v behind and a wait of %v", lag, short.ListingWait)
		dbtest.SameBytes(t, "local copy after the refused open", dbtest.FileBytes(t, filepath.Join(cfg.Dir, databaseFile)), before)
	})
	t.Run("waits for the listing", func(t *testing.T) {
		db2, c2 := reopen(t, cfg, 3)
		if n := countRows(t, c2); n != 200 {
			t.Fatalf("%d rows after an immediate reopen with a lagging listing, want 200", n)
		}
		assert.Equal(t, StartReused, db2.Stats().Start.From, "started")
	})
}

// unackedCrash commits rows 1..10 durably, then rows 11..15 while uploads
// are held, and crashes: the local copy holds 5 unacknowledged commits.
func unackedCrash(t *testing.T, b bucket.Bucket) (Config, *buckettest.Gate) {
	t.Helper()
	return unackedCrashN(t, b, 5)
}

// unackedCrashN is unackedCrash with n unacknowledged commits.
func unackedCrashN(t *testing.T, b bucket.Bucket, n int) (Config, *buckettest.Gate) {
	t.Helper()
	g := buckettest.NewGate(b, isLogKey)
	cfg := replTestConfig(t, g)
	db, c := reopen(t, cfg, 1)
	createRows(t, c, 10)
	require.NoError(t, db.Durable(t.Context()))
	g.Hold()
	insertRows(t, c, 11, 10+n)
	db.crash()
	c.Close()
	g.Release()
	return cfg, g
}

// What Open does with commits a crashed session captured but never
// uploaded: Config.Unacknowledged, counted in Stats either way.
func TestUnacknowledgedCommits(t *testing.T) {
	b := buckettest.Dir(t)
	t.Run("keep", func(t *testing.T) {
		cfg, _ := unackedCrash(t, b)
		cfg.Unacknowledged = KeepUnacknowledged
		db, c := reopen(t, cfg, 2)
		st := db.Stats().Start
		assert.Equal(t, StartKept, st.From, "start %+v, want kept 5", st)
		assert.Equal(t, int64(5), st.Kept, "start %+v, want kept 5", st)
		assert.Equal(t, int64(0), st.Discarded, "start %+v, want kept 5", st)
		if n := countRows(t, c); n != 15 {
			t.Errorf("%d rows, want 15", n)
		}
		// They are part of the new session: in the bucket once it starts.
		if got := replaySession(t, b, db.actor, 2); got.Seq < 16 {
			t.Errorf("new session starts at sequence %d, want past the 15 kept commits", got.Seq)
		}
	})
	t.Run("discard", func(t *testing.T) {
		cfg, _ := unackedCrash(t, b)
		cfg.Unacknowledged = DiscardUnacknowledged
		db, c := reopen(t, cfg, 2)
		st := db.Stats().Start
		assert.Equal(t, StartRestored, st.From, "start %+v, want restored with 5 discarded", st)
		assert.Equal(t, int64(5), st.Discarded, "start %+v, want restored with 5 discarded", st)
		assert.Equal(t, int64(0), st.Kept, "start %+v, want restored with 5 discarded", st)
		assert.Equal(t, "", st.Diverged, "start %+v, want restored with 5 discarded", st)
		if n := countRows(t, c); n != 10 {
			t.Errorf("%d rows, want the 10 acknowledged", n)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		plain := Config{Bucket: b, Actor: []byte{1}, Epoch: 1, Dir: t.TempDir()}
		withNode := Config{Bucket: b, Actor: []byte{1}, Node: registerNode(t, b, "127.0.0.1:7100"), Dir: t.TempDir()}
		for _, tc := range []struct {
			cfg  Config
			want Unacknowledged
		}{{plain, KeepUnacknowledged}, {withNode, DiscardUnacknowledged}} {
			got, err := tc.cfg.withDefaults()
			if err != nil || got.Unacknowledged != tc.want {
				t.Errorf("default with node %v: %v (%v), want %v", tc.cfg.Node != nil, got.Unacknowledged, err, tc.want)
			}
		}
	})
	t.Run("another owner wrote since", func(t *testing.T) {
		cfg, g := unackedCrash(t, b)
		// Another directory takes the actor over and writes.
		other := cfg
		other.Bucket, other.Dir = g, t.TempDir()
		db2, c2 := reopen(t, other, 2)
		dbtest.Exec(t, c2, "INSERT INTO t VALUES(100, 'other')")
		closeDB(t, db2, c2)
		cfg.Unacknowledged = KeepUnacknowledged
		db, c := reopen(t, cfg, 3)
		st := db.Stats().Start
		if st.From != StartRestored || st.Diverged == "" || st.Kept != 0 {
			t.Fatalf("start %+v, want restored with the local copy moved aside", st)
		}
		if n := countRows(t, c); n != 11 {
			t.Errorf("%d rows, want the other owner's 11", n)
		}
		aside, err := sqlite3.Open("file:" + st.Diverged + "?vfs=os&mode=ro")
		require.NoError(t, err)
		defer aside.Close()
		if n := countRows(t, aside); n != 15 {
			t.Errorf("the copy moved aside holds %d rows, want all 15", n)
		}
	})
	t.Run("one commit cut before its record", func(t *testing.T) {
		for _, policy := range []Unacknowledged{KeepUnacknowledged, DiscardUnacknowledged} {
			// A kill between a commit's WAL write and its captured record:
			// the file holds one commit more than the state file counts.
			cfg, _ := unackedCrashN(t, b, 1)
			st, err := readState(cfg.Dir)
			if err != nil || st.Captured != st.Durable.Seq+1 {
				t.Fatalf("state %+v, %v: want one commit captured past the durable one", st, err)
			}
			path := filepath.Join(cfg.Dir, stateFile)
			raw := dbtest.FileBytes(t, path)
			encodeCaptured(raw[offCaptured:offCaptured+capturedSize], st.Durable.Epoch, st.Durable.Seq)
			require.NoError(t, os.WriteFile(path, raw, 0o644))
			cfg.Unacknowledged = policy
			db2, c2 := reopen(t, cfg, 2)
			start, want := db2.Stats().Start, 10
			switch policy {
			case KeepUnacknowledged:
				want = 11
				assert.Equal(t, StartKept, start.From, "%v: start %+v, want the one commit kept", policy, start)
				assert.Equal(t, int64(1), start.Kept, "%v: start %+v, want the one commit kept", policy, start)
			default:
				assert.Equal(t, StartRestored, start.From, "%v: start %+v, want the one commit discarded", policy, start)
				assert.Equal(t, int64(1), start.Discarded, "%v: start %+v, want the one commit discarded", policy, start)
				assert.Equal(t, "", start.Diverged, "%v: start %+v, want the one commit discarded", policy, start)
			}
			if n := countRows(t, c2); n != want {
				t.Errorf("%v: %d rows, want %d", policy, n, want)
			}
		}
	})
	t.Run("after a restart of the machine", func(t *testing.T) {
		cfg, _ := unackedCrash(t, b)
		// Another boot ID: a power loss may have rolled back the local copy,
		// so it cannot be trusted to hold everything the bucket does.
		path := filepath.Join(cfg.Dir, stateFile)
		raw := dbtest.FileBytes(t, path)
		raw[16] ^= 0xff
		require.NoError(t, os.WriteFile(path, raw, 0o644))
		cfg.Unacknowledged = KeepUnacknowledged
		db, c := reopen(t, cfg, 2)
		st := db.Stats().Start
		if st.From != StartRestored || st.Diverged == "" {
			t.Errorf("start %+v, want restored with the local copy moved aside", st)
		}
		if n := countRows(t, c); n != 10 {
			t.Errorf("%d rows, want the 10 acknowledged", n)
		}
	})
}

// A crash with everything durable: the local copy is reused.
func TestReopenAfterCrashReuses(t *testing.T) {
	b := buckettest.Dir(t)
	cfg := replTestConfig(t, b)
	db, c := reopen(t, cfg, 1)
	createRows(t, c, 30)
	require.NoError(t, db.Durable(t.Context()))
	db.crash()
	c.Close()
	db2, c2 := reopen(t, cfg, 2)
	st := db2.Stats().Start
	assert.Equal(t, StartReused, st.From, "start %+v after a crash with everything durable, want reused", st)
	if n := countRows(t, c2); n != 30 {
		t.Errorf("%d rows, want 30", n)
	}
}

// A kill during a restore inside Open leaves its scratch directory; the
// next Open removes it.
func TestOpenRemovesRestoreScratch(t *testing.T) {
	cfg := replTestConfig(t, buckettest.Dir(t))
	scratch := filepath.Join(cfg.Dir, ".framectl-replay-123")
	require.NoError(t, os.MkdirAll(scratch, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "lane-0"), make([]byte, 8192), 0o644))
	db, _ := reopen(t, cfg, 1)
	_, err := os.Stat(scratch)
	assert.ErrorIs(t, err, os.ErrNotExist, "scratch left after Open")
	if got := db.Stats().Start.ScratchBytes; got != 8192 {
		t.Errorf("Start.ScratchBytes %d, want 8192", got)
	}
}

// A closed session whose newest batch was lost: a new directory's Open
// (it has no state file of its own) learns the session's end from
// own.json and refuses to start from an older state; with a node, from the
// record its claim replaced.
func TestOpenRefusesLostTail(t *testing.T) {
	for _, withNode := range []bool{false, true} {
		t.Run(fmt.Sprintf("node=%v", withNode), func(t *testing.T) {
			b := buckettest.Dir(t)
			cfg := replTestConfig(t, b)
			if withNode {
				cfg.Epoch, cfg.Node = 0, registerNode(t, b, "127.0.0.1:7200")
			}
			db, c := reopen(t, cfg, cfg.Epoch)
			dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
			for i := 1; i <= 5; i++ {
				insertRows(t, c, i, i)
				require.NoError(t, db.Durable(t.Context()))
			}
			closeDB(t, db, c)
			epoch := db.Epoch()
			last := db.Stats().Durable
			require.NoError(t, b.Delete(t.Context(), db.actor.LogKey(epoch, last)))
			other := cfg
			other.Dir, other.ListingWait = t.TempDir(), 50*time.Millisecond
			if !withNode {
				other.Epoch = epoch + 1
			}
			// Twice: a failed Open gives its claim back with the end it
			// learned, so the next claim still knows it.
			for attempt := 1; attempt <= 2; attempt++ {
				_, err := openDB(t.Context(), other)
				require.ErrorIs(t, err, ErrListingBehind, "open %d after the session's newest batch was lost", attempt)
				if !withNode {
					other.Epoch++
				}
			}
		})
	}
}

// failSnapshots fails every snapshot upload while set.
type failSnapshots struct {
	bucket.Bucket
	on atomic.Bool
}

func (f *failSnapshots) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if k, err := frames.ParseKey(key); err == nil && k.Kind == frames.KeySnapshot && f.on.Load() {
		return bucket.Info{}, errors.New("snapshot upload failed")
	}
	return f.Bucket.Put(ctx, key, body, size, cond)
}

// A session that stopped with its last batch in flight (it landed, the
// state file never recorded it durable) is reused through its in-flight
// record; an Open that then dies uploading its first snapshot must not
// lose that knowledge: the next Open reuses the local copy too, rather
// than take it for one holding unknown commits and move it aside.
func TestReuseSurvivesAFailedSessionStart(t *testing.T) {
	b := &failSnapshots{Bucket: buckettest.Dir(t)}
	cfg := replTestConfig(t, b)
	db, c := reopen(t, cfg, 1)
	createRows(t, c, 10)
	closeDB(t, db, c)
	// The state as a kill between the last upload and its durable record
	// leaves it: the last batch in flight, the durable record one behind.
	st, err := readState(cfg.Dir)
	if err != nil || !st.Durable.valid() {
		t.Fatalf("state %+v, %v", st, err)
	}
	raw := dbtest.FileBytes(t, filepath.Join(cfg.Dir, stateFile))
	behind := st.Durable
	behind.Seq--
	behind.Checksum++
	behind.encode(raw[offDurable : offDurable+recordSize])
	st.Durable.encode(raw[offInflight : offInflight+recordSize])
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Dir, stateFile), raw, 0o644))

	b.on.Store(true)
	bad := cfg
	bad.Epoch = 2
	_, err = openDB(t.Context(), bad)
	require.Error(t, err, "Open succeeded although its first snapshot could not be uploaded")
	b.on.Store(false)
	db3, c3 := reopen(t, cfg, 3)
	if st := db3.Stats().Start; st.From != StartReused || st.Diverged != "" {
		t.Errorf("start %+v after a failed session start, want the local copy reused", st)
	}
	if n := countRows(t, c3); n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
}
