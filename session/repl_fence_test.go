package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/require"
)

// freezable fails every write to node leases while frozen: the node it
// serves stops renewing, as if its process were paused.
type freezable struct {
	bucket.Bucket
	frozen atomic.Bool
}

func (f *freezable) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	if f.frozen.Load() && strings.HasPrefix(key, frames.NodesPrefix) {
		return bucket.Info{}, errors.New("frozen")
	}
	return f.Bucket.Put(ctx, key, body, size, cond)
}

// shortLease keeps takeovers quick in tests, yet long enough that a node
// renewing every third of it on a loaded two-core machine under -race does
// not lose it by accident (which would fail a test that needs it live).
var shortLease = fence.Options{Lease: time.Second, Grace: 500 * time.Millisecond}

func registerNode(t *testing.T, b bucket.Bucket, addr string) *fence.Node {
	t.Helper()
	n, err := fence.Register(t.Context(), b, addr, shortLease)
	require.NoError(t, err)
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// A node that stops renewing loses its database: nothing more is
// acknowledged, and a peer takes the actor over with everything that was.
func TestTakeoverAfterLeaseLoss(t *testing.T) {
	for name, newBucket := range map[string]func(testing.TB) bucket.Bucket{"dir": buckettest.Dir, "s3": buckettest.S3} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			shared := newBucket(t)
			fa := &freezable{Bucket: shared}
			nodeA := registerNode(t, fa, "127.0.0.1:7001")
			nodeB := registerNode(t, shared, "127.0.0.1:7002")
			cfgA := replTestConfig(t, fa)
			cfgA.Epoch, cfgA.Node = 0, nodeA
			dbA := replOpen(t, cfgA)
			require.Equal(t, frames.Epoch(1), dbA.cfg.Epoch, "first claim got epoch")
			c := replConn(t, dbA)
			dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY)")
			acked := 0
			for i := 1; i <= 50; i++ {
				dbtest.Exec(t, c, fmt.Sprintf("INSERT INTO t VALUES(%d)", i))
				require.NoError(t, dbA.Durable(ctx))
				acked = i
			}
			// While A renews, B is told where the actor lives.
			cfgB := replTestConfig(t, shared)
			cfgB.Actor, cfgB.Epoch, cfgB.Node = cfgA.Actor, 0, nodeB
			var held *fence.HeldError
			if _, err := openDB(ctx, cfgB); !errors.As(err, &held) || held.Address != "127.0.0.1:7001" {
				t.Fatalf("open of a held actor: %v", err)
			}
			// A freezes: within a lease it stops acknowledging.
			fa.frozen.Store(true)
			dbtest.Exec(t, c, "INSERT INTO t VALUES(1000)")
			deadline := time.Now().Add(5 * time.Second)
			for dbA.Durable(ctx) == nil {
				if time.Now().After(deadline) {
					t.Fatal("a node that cannot renew still acknowledges")
				}
				dbtest.Exec(t, c, "INSERT INTO t VALUES(NULL)")
				time.Sleep(20 * time.Millisecond)
			}
			errIs(t, dbA.Durable(ctx), ErrFenced)
			// B takes over once A's lease plus grace has passed on B's clock.
			var dbB *DB
			var err error
			for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
				if dbB, err = openDB(ctx, cfgB); err == nil || !errors.Is(err, fence.ErrHeld) {
					break
				}
			}
			require.NoError(t, err)
			defer dbB.Close(context.Background())
			require.Equal(t, frames.Epoch(2), dbB.cfg.Epoch, "takeover epoch")
			cb := replConn(t, dbB)
			if got := dbtest.Query1(t, cb, fmt.Sprintf("SELECT count(*) FROM t WHERE id <= %d", acked)); got != fmt.Sprint(acked) {
				t.Fatalf("the new owner has %s of the %d acknowledged rows", got, acked)
			}
			dbtest.Exec(t, cb, "INSERT INTO t VALUES(2000)")
			require.NoError(t, dbB.Durable(ctx))
			// A writes nothing more.
			require.Error(t, c.Exec("INSERT INTO t VALUES(3000)"), "the fenced database took a write")
		})
	}
}

// Close releases the actor: the next claimant gets the next epoch without
// waiting, and reuses nothing it should not.
func TestCloseReleasesAndNextOwnerRestores(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	nodeA := registerNode(t, b, "127.0.0.1:7001")
	nodeB := registerNode(t, b, "127.0.0.1:7002")
	cfg := replTestConfig(t, b)
	cfg.Epoch, cfg.Node = 0, nodeA
	dbA := replOpen(t, cfg)
	c := replConn(t, dbA)
	dbtest.Exec(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES('kept')")
	closeDB(t, dbA, c)
	// Another node, another directory: it restores.
	cfgB := cfg
	cfgB.Node, cfgB.Dir = nodeB, t.TempDir()
	dbB := replOpen(t, cfgB)
	if dbB.cfg.Epoch != 2 {
		t.Fatalf("epoch %d after a release", dbB.cfg.Epoch)
	}
	cb := replConn(t, dbB)
	require.Equal(t, "kept", dbtest.Query1(t, cb, "SELECT x FROM t"), "restored")
	cb.Close()
	require.NoError(t, dbB.Close(ctx))
	// Back to A's directory: its local copy is stale (session 1), so it is
	// replaced by the bucket's newest state rather than reused.
	cfg.Node = nodeA
	dbA2 := replOpen(t, cfg)
	require.Equal(t, frames.Epoch(3), dbA2.cfg.Epoch, "epoch")
	require.Equal(t, "1", dbtest.Query1(t, replConn(t, dbA2), "SELECT count(*) FROM t"), "rows")
}
