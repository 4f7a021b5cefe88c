package quorum_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/fence"
)

// A takeover's fences are counted by the followers that promised: none
// before it; then the new owner, a follower of the old one, promised once
// (its own store, in-process), and at least the n-q+1 the takeover waited
// for did, counted before their promise left. The old owner, a follower
// of nobody, promised nothing.
func TestFencesPromisedCounted(t *testing.T) {
	b, ns := fourNodes(t)
	db := openActor(t, ns[0], b, t.TempDir())
	c := writeRows(t, db, 3)
	for _, n := range ns {
		require.Zero(t, n.hub.Stats().Fences, "fences promised before any takeover")
	}
	ns[0].kill()

	rec, _, err := fence.ReadRecord(context.Background(), b, testActor)
	require.NoError(t, err)
	require.Len(t, rec.Followers, 3)
	next := recordedFollower(t, b, ns[1:])
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
