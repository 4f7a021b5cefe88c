package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/stretchr/testify/require"
)

// TestPartitionedOwner: a false suspicion, on real processes. Five nodes
// in peer mode at the default timings; the owner of an actor is cut off
// from every peer (SIGUSR1 with -fault-signals: its follower transport
// closes) while its HTTP server, its lease and its callers stay. Its
// followers and the node a caller reaches stop hearing it, so that node
// claims the actor on suspicion, without waiting for the owner's lease
// (which it never fences): the actor serves from the new owner, also for
// callers that still reach the old one (it forwards to the new owner),
// the old owner acknowledges nothing once a write was acknowledged
// elsewhere, and every acknowledged write is there, as the nodes serve it
// and as the bucket restores it.
func TestPartitionedOwner(t *testing.T) {
	forBackends(t, map[string]int{"dir": 1, "s3": 1}, func(t *testing.T, b bucket.Bucket, _ int) { partitionedOwner(t, b) })
}

func partitionedOwner(t *testing.T, b bucket.Bucket) {
	ctx := t.Context()
	const ns, id = "part", "a"
	c := newCluster(t, b, append(peerFlags(t), "-fault-signals", "-idle", "10m")...)
	ps := c.startN(5)
	owner := ps[0]
	s := &stream{ns: ns, id: id}
	for range 20 {
		r, body := s.post(ctx, owner)
		require.True(t, r.err == nil && r.status == http.StatusOK && r.node == owner.id, "%s: %v", body, r)
	}
	// A caller of another node, as the runtime's load balancer would send.
	other := nonFollower(t, b, ns, id, ps)
	for ok := 0; ok < 3; {
		if r, _ := s.post(ctx, other); r.err == nil && r.status == http.StatusOK {
			require.Equal(t, owner.id, r.node, "forwarded to the owner")
			ok++
		}
	}
	require.NoError(t, owner.cmd.Process.Signal(syscall.SIGUSR1))
	cut := time.Now()
	var moved time.Duration
	for moved == 0 {
		require.Less(t, time.Since(cut), hangGuard, "the actor never moved: %s", owner.logTail(20))
		for _, p := range []*proc{owner, other} {
			if r, _ := s.post(ctx, p); r.err == nil && r.status == http.StatusOK && r.node != owner.id {
				moved = time.Since(cut)
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	firstElsewhere := s.acks[len(s.acks)-1]
	// The old owner's callers: forwarded to the new owner, or 503.
	for range 10 {
		s.post(ctx, owner)
		time.Sleep(20 * time.Millisecond)
	}
	for _, a := range s.acks {
		if a.sent.After(firstElsewhere.at) {
			require.NotEqual(t, owner.id, a.node, "%s was acknowledged by the cut-off owner after the actor moved", a.body)
		}
	}
	require.NotEqual(t, owner.id, s.acks[len(s.acks)-1].node)
	// Only the actor was taken: the owner's lease is not fenced.
	lease, _, err := fence.ReadLease(ctx, b, owner.id)
	require.NoError(t, err)
	require.False(t, lease.Fenced, "the owner's lease was fenced: a claim on suspicion takes one actor, not the node")
	require.False(t, owner.isDown(), "the cut-off owner exited")

	notes, _, err := getNotes(ctx, c, ns, id)
	require.NoError(t, err)
	checkNotes(t, "served", id, s.acks, notes)
	// In peer mode an acknowledged write may be on followers only (uploads
	// at most every 10 s): the bucket holds every one once the nodes have
	// drained, the cut-off owner too (exit 0).
	drainAll(t, c)
	restored, _ := restoredNotes(t, b, ns, id)
	checkNotes(t, "restored", id, s.acks, restored)
	t.Logf("the actor moved %v after the cut; %d writes acknowledged, %d unavailable", moved.Round(time.Millisecond), len(s.acks), s.unavail)
	require.Empty(t, s.unexpected)
}
