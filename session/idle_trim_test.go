package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/internal/dbtest"
)

// An idle database keeps little of what its largest transaction needed:
// after a 2 MiB transaction (some 500 page buffers, all back in the pool
// once uploaded) the uploader, once idle for idleTrimAfter, trims the
// pool to idleKeepPages free buffers and drops the spare batch; before,
// the pool kept up to poolBytes (4 MiB) for as long as the database was
// open. A later commit still replicates.
func TestIdleReplicatorTrimsBuffers(t *testing.T) {
	b := buckettest.Dir(t)
	db := replOpen(t, replTestConfig(t, b))
	c := replConn(t, db)
	dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
	dbtest.Exec(t, c, "INSERT INTO t(b) SELECT randomblob(4000) FROM generate_series(1, 512)")
	require.NoError(t, db.Durable(t.Context()))
	r := db.rep
	r.mu.Lock()
	pool := r.pool
	r.mu.Unlock()
	require.NotNil(t, pool)
	made := pool.Made()
	require.Greater(t, made, 100, "page buffers the transaction took from the pool")

	trimmed := func() bool {
		r.mu.Lock()
		spare := r.freeBatch
		r.mu.Unlock()
		return spare == nil && pool.FreeBytes() <= idleKeepPages*pool.Size()
	}
	// A guard against hanging, not a threshold: the trim is due after
	// idleTrimAfter.
	deadline := time.Now().Add(30 * time.Second)
	for !trimmed() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, trimmed(), "idle: %d bytes of free page buffers, want at most %d, and no spare batch", pool.FreeBytes(), idleKeepPages*pool.Size())

	if r.state.captured != nil {
		// The state file's descriptor is closed while idle (a host holds
		// thousands of idle databases, each a file against the limit).
		// The uploader alone writes through it, and it is idle now.
		assert.Nil(t, r.state.f, "the state file is still open while idle")
	}

	dbtest.Exec(t, c, "UPDATE t SET b = randomblob(10) WHERE id = 1")
	require.NoError(t, db.Durable(t.Context()))
	// The next batch opened it again and recorded itself.
	st, err := readState(db.cfg.Dir)
	require.NoError(t, err)
	assert.Equal(t, db.Stats().Durable, st.Durable.Seq, "the state file's durable record after the idle close")
}
