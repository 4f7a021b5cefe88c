package quorum_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// A takeover's fences are counted by the followers that promised: none
// before it; then the new owner, a follower of the old one, promised once
// (its own store, in-process), and at least the n-q+1 the takeover waited
// for did, counted before their promise left. The old owner, a follower
// of nobody, promised nothing.
func TestFencesPromisedCounted(t *testing.T) {
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	key := clusterKey(t)
	ns := []*node{startNode(t, b, key), startNode(t, b, key), startNode(t, b, key), startNode(t, b, key)}
	db := openActor(t, ns[0], b, t.TempDir())
	c, err := db.Conn()
	require.NoError(t, err)
	require.NoError(t, c.Exec("CREATE TABLE t(i INTEGER)"))
	require.NoError(t, db.Durable(context.Background()))
	for i := range 3 {
		insert(t, db, c, i)
	}
	for _, n := range ns {
		require.Zero(t, n.hub.Stats().Fences, "fences promised before any takeover")
	}
	ns[0].kill()

	a := frames.Actor{Namespace: frames.NamespaceID("", "q"), Actor: frames.ActorKey([]byte("counter"))}
	rec, _, err := fence.ReadRecord(context.Background(), b, a)
	require.NoError(t, err)
	require.Len(t, rec.Followers, 3)
	var next *node
	for _, n := range ns[1:] {
		if n.store.ID() == rec.Followers[0] {
			next = n
		}
	}
	require.NotNil(t, next, "the first follower recorded is one of the nodes")
	db2 := openActor(t, next, b, t.TempDir())
	defer db2.Close(context.Background())
	require.Equal(t, int64(1), next.hub.Stats().Fences, "the new owner's own store promised once")
	var sum int64
	for _, n := range ns[1:] {
		sum += n.hub.Stats().Fences
	}
	require.GreaterOrEqual(t, sum, int64(len(rec.Followers)-rec.Quorum+1), "the promises the takeover waited for")
	require.Zero(t, ns[0].hub.Stats().Fences, "the old owner follows nobody")
	_ = c.Close()
}
