package session

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An outage longer than the lease stops the node and its database; once
// the bucket answers again, a new node and Reopen bring the database back
// in the same process, with what was acknowledged, and the commits made
// during the outage kept or discarded as configured.
func TestReopenAfterOutageLongerThanTheLease(t *testing.T) {
	for _, policy := range []Unacknowledged{DiscardUnacknowledged, KeepUnacknowledged} {
		t.Run(policy.String(), func(t *testing.T) {
			ctx := t.Context()
			b := buckettest.NewOutage(buckettest.Dir(t))
			// A lease long enough that a slow machine renews it while the
			// bucket answers: only the outage may end it.
			node, err := fence.Register(ctx, b, "127.0.0.1:7300", fence.Options{Lease: 2 * time.Second, Grace: time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { node.Close(context.Background()) })
			cfg := replTestConfig(t, b)
			cfg.Epoch, cfg.Node, cfg.Unacknowledged = 0, node, policy
			db := replOpen(t, cfg)
			c := replConn(t, db)
			createRows(t, c, 20)
			require.NoError(t, db.Durable(ctx))
			b.SetDown(true)
			insertRows(t, c, 21, 23) // captured, never uploaded
			select {
			case <-node.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the node outlived an outage longer than its lease")
			}
			require.ErrorIs(t, db.Durable(ctx), ErrFenced, "Durable after the lease ran out")
			c.Close()
			b.SetDown(false)

			var db2 *DB
			deadline := time.Now().Add(30 * time.Second)
			for {
				n2, err := node.Restart(ctx)
				require.NoError(t, err)
				t.Cleanup(func() { n2.Close(context.Background()) })
				for {
					db2, err = db.Reopen(ctx, n2)
					if !errors.Is(err, fence.ErrHeld) && !errors.Is(err, fence.ErrHolderUnseen) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("still not claimable: %v", err)
					}
					time.Sleep(50 * time.Millisecond)
				}
				if errors.Is(err, fence.ErrLeaseLost) && time.Now().Before(deadline) {
					continue // the new node's lease lapsed while it waited (a slow machine)
				}
				require.NoError(t, err)
				break
			}
			t.Cleanup(func() { db2.Close(context.Background()) })
			c2 := replConn(t, db2)
			want, st := 20, db2.Stats().Start
			switch policy {
			case KeepUnacknowledged:
				want = 23
				assert.Equal(t, StartKept, st.From, "start %+v, want the 3 commits of the outage kept", st)
				assert.Equal(t, int64(3), st.Kept, "start %+v, want the 3 commits of the outage kept", st)
			default:
				assert.Equal(t, int64(3), st.Discarded, "start %+v, want the 3 commits of the outage discarded", st)
				assert.Equal(t, int64(0), st.Kept, "start %+v, want the 3 commits of the outage discarded", st)
			}
			if n := countRows(t, c2); n != want {
				t.Errorf("%d rows after Reopen, want %d", n, want)
			}
			dbtest.Exec(t, c2, fmt.Sprintf("INSERT INTO t VALUES(%d, 'after')", 100))
			require.NoError(t, db2.Durable(ctx), "Durable after Reopen")
		})
	}
}
