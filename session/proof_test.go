package session

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// failsOwn fails the next n GETs of own.json, as a bucket that does not
// answer for a moment.
type failsOwn struct {
	bucket.Bucket
	key  string
	fail atomic.Int64
}

func (b *failsOwn) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if key == b.key && b.fail.Add(-1) >= 0 {
		return nil, bucket.Info{}, &bucket.Error{Op: "get", Key: key, Err: buckettest.ErrInjected}
	}
	return b.Bucket.Get(ctx, key)
}

// Every acknowledgement with something new to acknowledge reads own.json
// once after its upload landed: a Durable after a write, a Sync commit,
// Close's flush. A Durable with nothing new passes on a proof younger than
// ReadProofAge and reads own.json again once it is older; a proof that
// cannot be read is retried, never taken for one.
func TestEveryAcknowledgementIsProven(t *testing.T) {
	ctx := t.Context()
	shared := buckettest.Dir(t)
	cfg := replTestConfig(t, shared)
	actor := frames.Actor{Namespace: frames.NamespaceID(cfg.Tenant, cfg.Namespace), Actor: frames.ActorKey(cfg.Actor)}
	b := &failsOwn{Bucket: shared, key: actor.OwnKey()}
	node := registerNode(t, b, "127.0.0.1:7001")
	cfg.Bucket, cfg.Epoch, cfg.Node = b, 0, node
	cfg.ReadProofAge = 200 * time.Millisecond
	db, err := openDB(ctx, cfg)
	require.NoError(t, err)
	c := replConn(t, db)
	proofs := func() int64 { return db.Stats().Proofs }

	n := proofs()
	require.NoError(t, c.Exec("CREATE TABLE t(id INTEGER PRIMARY KEY)"))
	require.NoError(t, db.Durable(ctx))
	assert.Equal(t, n+1, proofs(), "proofs of a Durable after a write")

	// Nothing new: the last proof is young enough, then it is not.
	require.NoError(t, db.Durable(ctx))
	assert.Equal(t, n+1, proofs(), "proofs of a Durable with nothing new, at once")
	time.Sleep(cfg.ReadProofAge + 50*time.Millisecond)
	require.NoError(t, db.Durable(ctx))
	assert.Equal(t, n+2, proofs(), "proofs of a Durable with nothing new, once the proof is old")

	// A write is never acknowledged on an old proof, however young.
	require.NoError(t, c.Exec("INSERT INTO t VALUES(1)"))
	require.NoError(t, db.Durable(ctx))
	assert.Equal(t, n+3, proofs(), "proofs of a Durable after a second write")

	// Reads of own.json that fail are retried until one answers.
	b.fail.Store(2)
	require.NoError(t, c.Exec("INSERT INTO t VALUES(2)"))
	require.NoError(t, db.Durable(ctx))
	st := db.Stats()
	assert.Equal(t, n+6, st.Proofs, "proofs of a Durable whose first two reads failed")
	assert.Equal(t, int64(2), st.ProofErrors, "failed reads of own.json")

	// Close's flush proves what it flushed.
	require.NoError(t, c.Exec("INSERT INTO t VALUES(3)"))
	before := proofs()
	require.NoError(t, c.Close())
	require.NoError(t, db.Close(ctx))
	assert.Equal(t, before+1, db.Stats().Proofs, "proofs of Close")
}

// A Sync commit returns only once proven: one read of own.json per
// commit that waited alone.
func TestSyncCommitIsProven(t *testing.T) {
	shared := buckettest.Dir(t)
	cfg := replTestConfig(t, shared)
	cfg.Epoch, cfg.Node, cfg.Mode = 0, registerNode(t, shared, "127.0.0.1:7001"), Sync
	db := replOpen(t, cfg)
	c := replConn(t, db)
	require.NoError(t, c.Exec("CREATE TABLE t(id INTEGER PRIMARY KEY)"))
	n := db.Stats().Proofs
	for i := range 3 {
		require.NoError(t, c.Exec("INSERT INTO t DEFAULT VALUES"))
		assert.Equal(t, n+int64(i)+1, db.Stats().Proofs, "proofs after Sync commit %d", i+1)
	}
}

// A proof that finds another claim stops the session: the Durable waiting
// on it is told ErrFenced, and so is every later one.
func TestProofFindsAnotherClaim(t *testing.T) {
	ctx := t.Context()
	shared := buckettest.Dir(t)
	cfg := replTestConfig(t, shared)
	actor := frames.Actor{Namespace: frames.NamespaceID(cfg.Tenant, cfg.Namespace), Actor: frames.ActorKey(cfg.Actor)}
	cfg.Epoch, cfg.Node = 0, registerNode(t, shared, "127.0.0.1:7001")
	db := replOpen(t, cfg)
	c := replConn(t, db)
	require.NoError(t, c.Exec("CREATE TABLE t(id INTEGER PRIMARY KEY)"))
	require.NoError(t, db.Durable(ctx))

	// Another claim lands behind the node's back (its lease still valid).
	data, info, err := bucket.ReadAll(ctx, shared, actor.OwnKey(), 1<<20)
	require.NoError(t, err)
	forged := bytes.Replace(data, []byte(`"epoch":1`), []byte(`"epoch":2`), 1)
	require.NotEqual(t, data, forged, "own.json has no epoch 1 to replace: %s", data)
	_, err = shared.Put(ctx, actor.OwnKey(), bytes.NewReader(forged), int64(len(forged)), bucket.Condition{IfMatch: info.ETag})
	require.NoError(t, err)
	require.NoError(t, cfg.Node.Valid())

	require.NoError(t, c.Exec("INSERT INTO t VALUES(1)"))
	err = db.Durable(ctx)
	errIs(t, err, ErrFenced)
	errIs(t, db.Stats().Stopped, ErrFenced)
	errIs(t, db.Durable(ctx), ErrFenced)
}
