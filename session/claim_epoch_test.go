package session

import (
	"context"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/stretchr/testify/require"
)

// An actor whose own.json was lost opens at once, in a session above the
// ones the bucket holds, with everything they hold.
func TestOpenAfterOwnRecordLost(t *testing.T) {
	for name, newBucket := range map[string]func(testing.TB) bucket.Bucket{"dir": buckettest.Dir, "s3": buckettest.S3} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			b := newBucket(t)
			nodeA := registerNode(t, b, "127.0.0.1:7001")
			nodeB := registerNode(t, b, "127.0.0.1:7002")
			cfg := replTestConfig(t, b)
			cfg.Epoch, cfg.Node = 0, nodeA
			for i := 1; i <= 2; i++ {
				db := replOpen(t, cfg)
				c := replConn(t, db)
				dbtest.Exec(t, c, "CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(1)")
				closeDB(t, db, c)
			}
			actor := frames.Actor{Namespace: frames.NamespaceID(cfg.Tenant, cfg.Namespace), Actor: frames.ActorKey(cfg.Actor)}
			require.NoError(t, b.Delete(ctx, actor.OwnKey()))
			cfgB := cfg
			cfgB.Node, cfgB.Dir = nodeB, t.TempDir()
			dbB, err := openDB(ctx, cfgB)
			require.NoError(t, err, "first open after own.json was lost")
			defer dbB.Close(context.Background())
			if dbB.Epoch() != 3 {
				t.Fatalf("epoch %d, want 3 (above sessions 1 and 2)", dbB.Epoch())
			}
			if got := dbtest.Query1(t, replConn(t, dbB), "SELECT count(*) FROM t"); got != "2" {
				t.Fatalf("%s rows, want 2", got)
			}
		})
	}
}
