package session

import (
	"context"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An hour's pacing: async commits nobody waits for stay local, and the
// first Durable uploads them at once, all in one batch.
func TestPacingHoldsOnlyWhatNobodyWaitsFor(t *testing.T) {
	b := buckettest.Dir(t)
	cfg := replTestConfig(t, b)
	cfg.UploadInterval = time.Hour
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t VALUES(1, 0)")
	require.NoError(t, db.Durable(t.Context()))
	before := db.Stats()
	for range 200 {
		dbtest.Exec(t, c, "UPDATE t SET n = n + 1")
	}
	// Give a wrongly unpaced uploader time to show itself.
	time.Sleep(200 * time.Millisecond)
	held := db.Stats()
	if held.Batches > before.Batches+1 {
		t.Fatalf("%d batches uploaded during an hour's pacing (before: %d): pacing did not hold", held.Batches, before.Batches)
	}
	if held.Durable == held.Captured {
		t.Fatalf("all %d commits already durable during an hour's pacing", held.Captured)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, db.Durable(ctx), "Durable waited for the pacing interval")
	after := db.Stats()
	if after.Durable != after.Captured {
		t.Fatalf("Durable returned with %d of %d durable", after.Durable, after.Captured)
	}
	if after.Batches > held.Batches+2 {
		t.Errorf("Durable took %d uploads for what pacing held", after.Batches-held.Batches)
	}
	want := checkpointed(t, c, db.Path())
	got := replaySession(t, b, db.actor, cfg.Epoch)
	dbtest.SameBytes(t, "replayed session vs database", dbtest.FileBytes(t, got.Path), want)
}

// Sync commits, backpressure and Close never wait for the interval.
func TestPacingNeverDelaysWaiters(t *testing.T) {
	t.Run("sync", func(t *testing.T) {
		cfg := replTestConfig(t, buckettest.Dir(t))
		cfg.UploadInterval = time.Hour
		cfg.Mode = Sync
		cfg.SyncTimeout = 30 * time.Second
		db := replOpen(t, cfg)
		c := replConn(t, db)
		dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t VALUES(1, 0)")
		for i := range 20 {
			dbtest.Exec(t, c, "UPDATE t SET n = n + 1") // fails with ErrSyncTimeout if paced
			if st := db.Stats(); st.Durable != st.Captured {
				t.Fatalf("sync commit %d returned with %d of %d durable", i, st.Durable, st.Captured)
			}
		}
	})
	t.Run("backpressure", func(t *testing.T) {
		cfg := replTestConfig(t, buckettest.Dir(t))
		cfg.UploadInterval = time.Hour
		cfg.MaxPendingBytes = 64 << 10
		cfg.BackpressureTimeout = 30 * time.Second
		db := replOpen(t, cfg)
		c := replConn(t, db)
		dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
		// 2 MiB through a 64 KiB backlog: each write past the limit
		// waits for uploads, which must start although nobody calls
		// Durable.
		for range 64 {
			dbtest.Exec(t, c, "INSERT INTO t(b) VALUES(randomblob(32768))")
		}
		// Only backpressure can have started these uploads: nobody
		// waited, no batch reached MaxBatchBytes, and the interval is
		// an hour.
		if st := db.Stats(); st.Batches < 4 {
			t.Fatalf("%d batches for 2 MiB through a 64 KiB backlog: the writer never met backpressure", st.Batches)
		}
	})
	t.Run("close", func(t *testing.T) {
		b := buckettest.Dir(t)
		cfg := replTestConfig(t, b)
		cfg.UploadInterval = time.Hour
		db, err := openDB(t.Context(), cfg)
		require.NoError(t, err)
		c, err := db.Conn()
		require.NoError(t, err)
		dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t VALUES(1, 0)")
		for range 50 {
			dbtest.Exec(t, c, "UPDATE t SET n = n + 1")
		}
		want := checkpointed(t, c, db.Path())
		c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		require.NoError(t, db.Close(ctx), "Close waited for the pacing interval")
		got := replaySession(t, b, db.actor, cfg.Epoch)
		dbtest.SameBytes(t, "replayed session vs database", dbtest.FileBytes(t, got.Path), want)
	})
}

// unwrapping observes a bucket and says which (as package metrics's
// wrapper does).
type unwrapping struct{ bucket.Bucket }

func (u *unwrapping) Unwrap() bucket.Bucket { return u.Bucket }

// selfWrapping unwraps to itself.
type selfWrapping struct{ bucket.Bucket }

func (s selfWrapping) Unwrap() bucket.Bucket { return s }

// The default paces a directory bucket and an S3 bucket, each by its own
// interval (also through wrappers that say what they wrap), and no other.
func TestUploadIntervalDefault(t *testing.T) {
	dir := buckettest.Dir(t)
	// Open makes no request: the endpoint is never dialled.
	s3, err := bucket.Open(t.Context(), "s3://unused/p?endpoint=127.0.0.1:9&insecure=1")
	require.NoError(t, err)
	for _, tc := range []struct {
		b    bucket.Bucket
		set  time.Duration
		want time.Duration
	}{
		{dir, 0, DefaultDirUploadInterval},
		{dir, -1, -1},
		{dir, time.Second, time.Second},
		{buckettest.NewFaulty(dir, buckettest.FaultConfig{}), 0, 0},
		// A wrapper that says what it wraps is paced as that bucket.
		{&unwrapping{dir}, 0, DefaultDirUploadInterval},
		{&unwrapping{&unwrapping{s3}}, 0, DefaultS3UploadInterval},
		{&unwrapping{buckettest.NewFaulty(dir, buckettest.FaultConfig{})}, 0, 0},
		{&unwrapping{dir}, -1, -1},
		{selfWrapping{dir}, 0, 0},
		{s3, 0, DefaultS3UploadInterval},
		{s3, -1, -1},
		{s3, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		cfg := replTestConfig(t, tc.b)
		cfg.UploadInterval = tc.set
		got, err := cfg.withDefaults()
		require.NoError(t, err)
		assert.Equal(t, tc.want, got.UploadInterval, "%T with UploadInterval %v", tc.b, tc.set)
	}
}
