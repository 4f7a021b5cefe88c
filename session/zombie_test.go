package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/internal/stopclock"
	"github.com/framectl/framectl/restore"
	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// ownLog orders the reads of own.json by one node against the moment
// another node's claim landed: seq counts events across both.
type ownLog struct {
	seq     atomic.Int64
	claimed atomic.Int64 // seq when the claim's PUT returned; 0: not yet
	mu      sync.Mutex
	reads   []ownRead
}

type ownRead struct {
	began int64 // seq when the GET began
	rec   fence.Record
	err   error
}

// readsOwn logs node A's GETs of own.json.
type readsOwn struct {
	bucket.Bucket
	key string
	log *ownLog
}

func (b *readsOwn) Get(ctx context.Context, key string) (io.ReadCloser, bucket.Info, error) {
	if key != b.key {
		return b.Bucket.Get(ctx, key)
	}
	began := b.log.seq.Add(1)
	data, info, err := bucket.ReadAll(ctx, b.Bucket, key, fence.MaxRecordBytes)
	r := ownRead{began: began, err: err}
	if err == nil {
		r.rec, r.err = fence.ParseRecord(key, data)
	}
	b.log.mu.Lock()
	b.log.reads = append(b.log.reads, r)
	b.log.mu.Unlock()
	if err != nil {
		return nil, info, err
	}
	return io.NopCloser(bytes.NewReader(data)), info, nil
}

// claimsOwn notes when node B's PUT of own.json returned.
type claimsOwn struct {
	bucket.Bucket
	key string
	log *ownLog
}

func (b *claimsOwn) Put(ctx context.Context, key string, body io.Reader, size int64, cond bucket.Condition) (bucket.Info, error) {
	info, err := b.Bucket.Put(ctx, key, body, size, cond)
	if key == b.key && err == nil {
		b.log.claimed.CompareAndSwap(0, b.log.seq.Add(1))
	}
	return info, err
}

// A zombie whose clock lies: the owner's clock stops (it never renews
// again, and believes its lease valid for ever) while another node claims
// the actor and writes. The zombie keeps committing and asking for
// Durable. Every commit it was told is durable is in the new owner's
// history, no acknowledgement rests on a read of own.json begun after the
// claim landed, and the zombie is told it was fenced.
func TestZombieWithStoppedClock(t *testing.T) {
	for name, newBucket := range map[string]func(testing.TB) bucket.Bucket{"dir": buckettest.Dir, "s3": buckettest.S3} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			shared := newBucket(t)
			cfgA := replTestConfig(t, shared)
			actor := frames.Actor{Namespace: frames.NamespaceID(cfgA.Tenant, cfgA.Namespace), Actor: frames.ActorKey(cfgA.Actor)}
			log := &ownLog{}
			clock := &stopclock.Clock{}
			optsA := shortLease
			optsA.Clock = clock
			bucketA := &readsOwn{Bucket: shared, key: actor.OwnKey(), log: log}
			nodeA, err := fence.Register(ctx, bucketA, "127.0.0.1:7001", optsA)
			require.NoError(t, err)
			t.Cleanup(func() { nodeA.Close(context.Background()) })
			nodeB := registerNode(t, &claimsOwn{Bucket: shared, key: actor.OwnKey(), log: log}, "127.0.0.1:7002")

			cfgA.Bucket, cfgA.Epoch, cfgA.Node = bucketA, 0, nodeA
			dbA := replOpen(t, cfgA)
			c := replConn(t, dbA)
			dbtest.Exec(t, c, "CREATE TABLE t(id INTEGER PRIMARY KEY)")
			var acked []int
			next := 1
			write := func() error {
				id := next
				next++
				if err := c.Exec(fmt.Sprintf("INSERT INTO t VALUES(%d)", id)); err != nil {
					return err
				}
				if err := dbA.Durable(ctx); err != nil {
					return err
				}
				acked = append(acked, id)
				return nil
			}
			for range 20 {
				require.NoError(t, write())
			}

			// A's clock stops. B, on a clock that runs, sees A's lease
			// unrenewed, fences it and claims the actor; A keeps writing.
			clock.Stop()
			cfgB := replTestConfig(t, shared)
			cfgB.Actor, cfgB.Epoch, cfgB.Node = cfgA.Actor, 0, nodeB
			type opened struct {
				db  *DB
				err error
			}
			claimed := make(chan opened, 1)
			go func() {
				for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
					db, err := openDB(ctx, cfgB)
					if err == nil || (!errors.Is(err, fence.ErrHeld) && !errors.Is(err, fence.ErrHolderUnseen)) || time.Since(start) > 30*time.Second {
						claimed <- opened{db, err}
						return
					}
				}
			}()
			var zombieErr error
			var b opened
		writing:
			for {
				select {
				case b = <-claimed:
					break writing
				default:
				}
				require.NoError(t, nodeA.Valid(), "the stopped clock keeps the lease valid")
				if zombieErr = write(); zombieErr != nil {
					b = <-claimed // only a claim stops A now
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.NoError(t, b.err, "B's claim")
			// A commit refused once replication stopped fails in SQLite
			// (disk I/O error); the session says why.
			fenced := func(err error) {
				t.Helper()
				require.Error(t, err, "A wrote on after B's claim")
				if !errors.Is(err, ErrFenced) {
					errIs(t, dbA.Stats().Stopped, ErrFenced)
				}
			}
			if zombieErr != nil {
				fenced(zombieErr)
			}
			dbB := b.db
			defer dbB.Close(context.Background())
			require.Equal(t, frames.Epoch(2), dbB.cfg.Epoch)
			cb := replConn(t, dbB)
			dbtest.Exec(t, cb, "INSERT INTO t VALUES(1000000)")
			require.NoError(t, dbB.Durable(ctx))

			// A, its lease still valid by its clock, keeps trying: it is
			// told it was fenced, and acknowledges nothing more.
			for range 5 {
				if zombieErr = write(); zombieErr != nil {
					break
				}
			}
			fenced(zombieErr)
			require.NoError(t, nodeA.Valid(), "A's own clock never told it")
			errIs(t, dbA.Durable(ctx), ErrFenced)

			for _, id := range acked {
				if got := dbtest.Query1(t, cb, fmt.Sprintf("SELECT count(*) FROM t WHERE id = %d", id)); got != "1" {
					t.Errorf("row %d, acknowledged by A, is not in B's history", id)
				}
			}
			claimedAt := log.claimed.Load()
			require.NotZero(t, claimedAt, "B's claim was seen landing")
			log.mu.Lock()
			defer log.mu.Unlock()
			// A read begun while B's PUT was still on its way back may
			// already see B's claim (it landed before the response
			// returned), so "learned" counts reads that saw it, whenever
			// they began; "after" only those begun once the PUT returned.
			var after, learned int
			for _, r := range log.reads {
				if r.err == nil && r.rec.Epoch > 1 {
					learned++
				}
				if r.began > claimedAt {
					after++
					if r.err == nil && r.rec.Epoch == 1 && r.rec.Node == nodeA.ID() {
						t.Errorf("a read of own.json begun after B's claim landed names A's claim: %+v", r.rec)
					}
				}
			}
			require.NotZero(t, learned, "A read own.json and saw B's claim (that is how it learned)")
			t.Logf("A: %d acknowledged, %d reads of own.json (%d begun after B's claim returned, %d saw it), told %v", len(acked), len(log.reads), after, learned, zombieErr)

			// What A uploaded after B's claim (unconditional PUTs) is no
			// damage: the bucket verifies, and restores B's history.
			require.NoError(t, dbB.Close(ctx))
			rep, err := restore.Verify(ctx, shared, actor, restore.VerifyOptions{})
			require.NoError(t, err)
			require.False(t, rep.Damaged(), "the bucket after the zombie is damaged: %v", rep.Problems)
			t.Logf("verify: %d warnings (A's objects superseded by B's session)", len(rep.Problems))
			dest := filepath.Join(t.TempDir(), "r.db")
			_, err = restore.Restore(ctx, shared, actor, dest, restore.Options{})
			require.NoError(t, err)
			rc, err := sqlite3.Open(dest)
			require.NoError(t, err)
			defer rc.Close()
			for _, id := range append(acked, 1000000) {
				if got := dbtest.Query1(t, rc, fmt.Sprintf("SELECT count(*) FROM t WHERE id = %d", id)); got != "1" {
					t.Errorf("row %d is not in the restored bucket", id)
				}
			}
		})
	}
}
