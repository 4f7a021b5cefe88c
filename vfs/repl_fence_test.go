package vfs

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
	if err != nil {
		t.Fatal(err)
	}
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
			if dbA.cfg.Epoch != 1 {
				t.Fatalf("first claim got epoch %d", dbA.cfg.Epoch)
			}
			c := replConn(t, dbA)
			execSQL(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY)")
			acked := 0
			for i := 1; i <= 50; i++ {
				execSQL(t, c, fmt.Sprintf("INSERT INTO t VALUES(%d)", i))
				if err := dbA.Durable(ctx); err != nil {
					t.Fatal(err)
				}
				acked = i
			}
			// While A renews, B is told where the actor lives.
			cfgB := replTestConfig(t, shared)
			cfgB.Actor, cfgB.Epoch, cfgB.Node = cfgA.Actor, 0, nodeB
			var held *fence.HeldError
			if _, err := Open(ctx, cfgB); !errors.As(err, &held) || held.Address != "127.0.0.1:7001" {
				t.Fatalf("open of a held actor: %v", err)
			}
			// A freezes: within a lease it stops acknowledging.
			fa.frozen.Store(true)
			execSQL(t, c, "INSERT INTO t VALUES(1000)")
			deadline := time.Now().Add(5 * time.Second)
			for dbA.Durable(ctx) == nil {
				if time.Now().After(deadline) {
					t.Fatal("a node that cannot renew still acknowledges")
				}
				execSQL(t, c, "INSERT INTO t VALUES(NULL)")
				time.Sleep(20 * time.Millisecond)
			}
			errIs(t, dbA.Durable(ctx), ErrFenced)
			// B takes over once A's lease plus grace has passed on B's clock.
			var dbB *DB
			var err error
			for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
				if dbB, err = Open(ctx, cfgB); err == nil || !errors.Is(err, fence.ErrHeld) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer dbB.Close(context.Background())
			if dbB.cfg.Epoch != 2 {
				t.Fatalf("takeover epoch %d", dbB.cfg.Epoch)
			}
			cb := replConn(t, dbB)
			if got := query1(t, cb, fmt.Sprintf("SELECT count(*) FROM t WHERE id <= %d", acked)); got != fmt.Sprint(acked) {
				t.Fatalf("the new owner has %s of the %d acknowledged rows", got, acked)
			}
			execSQL(t, cb, "INSERT INTO t VALUES(2000)")
			if err := dbB.Durable(ctx); err != nil {
				t.Fatal(err)
			}
			// A writes nothing more.
			if err := c.Exec("INSERT INTO t VALUES(3000)"); err == nil {
				t.Fatal("the fenced database took a write")
			}
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
	dbA, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dbA.Conn()
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, c, "CREATE TABLE t(x); INSERT INTO t VALUES('kept')")
	c.Close()
	if err := dbA.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Another node, another directory: it restores.
	cfgB := cfg
	cfgB.Node, cfgB.Dir = nodeB, t.TempDir()
	dbB := replOpen(t, cfgB)
	if dbB.cfg.Epoch != 2 {
		t.Fatalf("epoch %d after a release", dbB.cfg.Epoch)
	}
	cb := replConn(t, dbB)
	if got := query1(t, cb, "SELECT x FROM t"); got != "kept" {
		t.Fatalf("restored %q", got)
	}
	cb.Close()
	if err := dbB.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Back to A's directory: its local copy is stale (session 1), so it is
	// replaced by the bucket's newest state rather than reused.
	cfg.Node = nodeA
	dbA2 := replOpen(t, cfg)
	if dbA2.cfg.Epoch != 3 {
		t.Fatalf("epoch %d", dbA2.cfg.Epoch)
	}
	if got := query1(t, replConn(t, dbA2), "SELECT count(*) FROM t"); got != "1" {
		t.Fatalf("rows %s", got)
	}
}
