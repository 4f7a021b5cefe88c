package quorum_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/stopclock"
	"github.com/framectl/framectl/session"
)

// A zombie whose clock lies, in peer mode: the owner's clock stops (it
// never renews again, and believes its lease valid for ever) while one of
// its followers claims the actor, fences the others and writes. The
// zombie keeps committing and asking for Durable. Every commit it was
// told is durable is in the new owner's history (the followers' epoch
// check refuses it once they are fenced, and the bucket's proof finds the
// new claim), it acknowledged by followers before (the peer path was the
// one tested), and it is told it was fenced while its own clock says its
// lease is valid. (Package session's TestZombieWithStoppedClock is the
// bucket path.)
func TestZombieWithStoppedClockPeers(t *testing.T) {
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	key := clusterKey(t)
	clock := &stopclock.Clock{}
	ns := []*node{startNodeWith(t, b, key, nodeOptions{clock: clock}), startNode(t, b, key), startNode(t, b, key), startNode(t, b, key)}
	ctx := t.Context()
	dbA := openActor(t, ns[0], b, t.TempDir())
	defer dbA.Close(context.Background())
	w := newRowWriter(t, dbA)
	write := func() error { return w.write(ctx) }
	for range 20 {
		require.NoError(t, write())
	}
	require.Positive(t, dbA.Stats().AckedByPeers, "acknowledgements by followers before the clock stopped")

	clock.Stop()
	newOwner := recordedFollower(t, b, ns)
	claimed := make(chan *framectl.DB, 1)
	go func() { claimed <- openActor(t, newOwner, b, t.TempDir()) }()
	var zombieErr error
	var dbB *framectl.DB
writing:
	for {
		select {
		case dbB = <-claimed:
			break writing
		default:
		}
		require.NoError(t, ns[0].fn.Valid(), "the stopped clock keeps the lease valid")
		if zombieErr = write(); zombieErr != nil {
			dbB = <-claimed // only the takeover stops A now
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer dbB.Close(context.Background())
	cb, err := dbB.Conn()
	require.NoError(t, err)
	defer cb.Close()
	require.NoError(t, cb.Exec("INSERT INTO t(i) VALUES (1000000)"))
	require.NoError(t, dbB.Durable(ctx))

	// A, its lease valid by its clock, keeps trying and is told it was
	// fenced: by the followers (superseded) or by the bucket's proof.
	for range 5 {
		if zombieErr = write(); zombieErr != nil {
			break
		}
	}
	require.Error(t, zombieErr, "A acknowledged writes after the takeover")
	require.NoError(t, ns[0].fn.Valid(), "A's own clock never told it")
	stopped := dbA.Stats().Stopped
	require.True(t, errors.Is(stopped, session.ErrFenced) || errors.Is(stopped, follow.ErrSuperseded),
		"A stopped with %v, told %v", stopped, zombieErr)

	got := rows(t, cb)
	for _, i := range w.acked {
		if !slices.Contains(got, i) {
			t.Errorf("row %d, acknowledged by A, is not in the new owner's history", i)
		}
	}
	t.Logf("A: %d acknowledged (%d by followers, %d by the bucket), stopped with %v", len(w.acked), dbA.Stats().AckedByPeers, dbA.Stats().AckedByBucket, stopped)
}
