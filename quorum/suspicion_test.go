package quorum_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/peer"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/session"
)

// A false suspicion: the owner is cut off from every peer (its transport
// closed) but its lease is renewed and its callers still reach it. A
// follower claims the actor on suspicion, confirmed by another follower,
// without waiting for the owner's lease or fencing it. The owner goes on
// committing and asking for Durable: from the claim on it is told it was
// fenced, its lease still valid, and every commit it was told is durable
// is in the new owner's history.
func TestFalseSuspicion(t *testing.T) {
	b, ns := fourNodes(t)
	ctx := t.Context()
	owner := ns[0]
	dbA := openActor(t, owner, b, t.TempDir())
	defer dbA.Close(context.Background())
	w := newRowWriter(t, dbA)
	write := func() error { return w.write(ctx) }
	for range 20 {
		require.NoError(t, write())
	}
	require.Positive(t, dbA.Stats().AckedByPeers)
	heir := recordedFollower(t, b, ns)
	rec, _, err := fence.ReadRecord(ctx, b, testActor)
	require.NoError(t, err)
	_, lease, err := heir.fn.Observer.Judge(ctx, rec.Node)
	require.NoError(t, err)
	s := &quorum.Suspicion{Self: heir.id(), Detector: heir.pn, Directory: quorum.NewLeases(heir.fn, heir.pn)}
	// Heard: not confirmed.
	require.ErrorIs(t, s.Confirm(ctx, rec, lease), quorum.ErrNotSuspected)

	cut := time.Now()
	owner.pn.Close() // the partition: no peer hears it, it hears none
	var confirmed time.Duration
	for {
		err := s.Confirm(ctx, rec, lease)
		if err == nil {
			confirmed = time.Since(cut)
			break
		}
		require.ErrorIs(t, err, quorum.ErrNotSuspected)
		require.Less(t, time.Since(cut), 30*time.Second, "never confirmed: %v", err)
		// The owner keeps serving meanwhile (by the bucket, now).
		require.NoError(t, write())
		time.Sleep(20 * time.Millisecond)
	}
	require.GreaterOrEqual(t, confirmed, peer.DefaultSuspectAfter-2*peer.DefaultHeartbeat,
		"confirmed %v after the cut, sooner than SuspectAfter allows", confirmed)

	var dbB *framectl.DB
	for {
		dbB, err = framectl.Open(ctx, session.Config{Bucket: b, Namespace: "q", Actor: []byte("counter"), Dir: t.TempDir(),
			Node: heir.fn, Peers: heir.hub.Session(testActor), UploadInterval: time.Hour, Suspect: s.Confirm})
		if err == nil {
			break
		}
		require.ErrorIs(t, err, fence.ErrHeld)
		require.Less(t, time.Since(cut), 30*time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	defer dbB.Close(context.Background())
	live, _, err := heir.fn.Observer.Judge(ctx, rec.Node)
	require.NoError(t, err)
	require.Equal(t, fence.Alive, live, "the claim waited for the owner's lease, or fenced it")
	require.NoError(t, owner.fn.Valid(), "the owner's lease is valid: only this actor was taken")

	var zombieErr error
	for range 5 {
		if zombieErr = write(); zombieErr != nil {
			break
		}
	}
	require.Error(t, zombieErr, "the owner acknowledged writes after the claim")
	stopped := dbA.Stats().Stopped
	require.True(t, errors.Is(stopped, session.ErrFenced) || errors.Is(stopped, follow.ErrSuperseded),
		"the owner stopped with %v, told %v", stopped, zombieErr)

	cb, err := dbB.Conn()
	require.NoError(t, err)
	defer cb.Close()
	require.NoError(t, cb.Exec("INSERT INTO t(i) VALUES (1000000)"))
	require.NoError(t, dbB.Durable(ctx))
	got := rows(t, cb)
	for _, i := range w.acked {
		if !slices.Contains(got, i) {
			t.Errorf("row %d, acknowledged by the owner, is not in the new owner's history", i)
		}
	}
	require.Equal(t, uint64(2), s.Stats().Confirmed, "the loop's confirmation and the claim's")
	t.Logf("confirmed %v after the cut; the owner acknowledged %d (%d by followers), stopped with %v",
		confirmed.Round(time.Millisecond), len(w.acked), dbA.Stats().AckedByPeers, stopped)
}
