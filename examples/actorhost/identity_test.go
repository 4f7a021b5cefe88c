package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
)

// TestCopiedDataDirectory: a follower's data directory is copied twice
// while its node runs: one copy is started at once beside it (a cloned
// machine), the other is kept for later (a backup). The first copy opens
// under the follower's ID and takes the bucket's identity record (its
// generation is the record's), so the original stops answering as that
// follower within a check (and its lease is fenced by the copy's start);
// restarted on its own directory, the original comes back as a new
// follower, as does the backup when it is started, both being behind
// the record. Through all of it the actor is written, its owner killed
// and the actor taken over: every acknowledged write is there, served and
// restored.
func TestCopiedDataDirectory(t *testing.T) {
	forBackends(t, map[string]int{"dir": 1, "s3": 1}, func(t *testing.T, b bucket.Bucket, _ int) { copiedDataDirectory(t, b) })
}

func copiedDataDirectory(t *testing.T, b bucket.Bucket) {
	ctx := t.Context()
	const ns, id = "copy", "a"
	c := newCluster(t, b, peerFlags(t)...)
	ps := c.startN(4)
	owner := ps[0]
	s := &stream{ns: ns, id: id}
	for range 10 {
		_, err := s.postUntilOK(ctx, owner)
		require.NoError(t, err)
	}
	rec, _, err := fence.ReadRecord(ctx, b, actorOf(ns, id))
	require.NoError(t, err)
	require.Len(t, rec.Followers, 3)
	var orig *proc
	for _, p := range ps[1:] {
		if slices.Contains(rec.Followers, followerID(t, p)) {
			orig = p
			break
		}
	}
	require.NotNil(t, orig)
	x := followerID(t, orig)
	backup := filepath.Join(c.root, "backup")
	for _, dst := range []string{backup, filepath.Join(c.root, "node4")} {
		out, err := exec.Command("cp", "-a", orig.data, dst).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}

	// The clone, beside the original: it is follower x now.
	orig.setDown(true, true) // its lease is fenced: it exits 3
	clone := c.start(4)
	require.Equal(t, x, followerID(t, clone), "the clone opened at the record's generation")
	lease, _, err := fence.ReadLease(ctx, b, clone.id)
	require.NoError(t, err)
	require.Equal(t, x, lease.Follower)
	// Whichever comes first: its identity check, or its lease renewal
	// finding the fence.
	require.True(t, waitFor(ctx, hangGuard, func() bool {
		select {
		case <-orig.exited:
			return true
		default:
			return strings.Contains(orig.logTail(200), "another process opened a copy of this node's follower store")
		}
	}), "the original went on as follower %s: %s", x, orig.logTail(20))
	for range 10 {
		_, err := s.postUntilOK(ctx, owner)
		require.NoError(t, err)
	}

	// The original, restarted on its own directory, is behind the
	// record: a new follower.
	<-orig.exited
	again := c.start(orig.slot)
	require.NotEqual(t, x, followerID(t, again), "the original restarted as the follower its clone now is")
	// So is the backup.
	require.NoError(t, os.RemoveAll(filepath.Join(c.root, "node5")))
	require.NoError(t, os.Rename(backup, filepath.Join(c.root, "node5")))
	restored := c.start(5)
	require.NotEqual(t, x, followerID(t, restored), "the backup came back as follower %s", x)
	require.NotEqual(t, followerID(t, again), followerID(t, restored))
	require.Contains(t, restored.logTail(200), "the follower store is a copy of another")

	// The owner dies; another node takes the actor over from the
	// followers and the bucket.
	owner.kill()
	<-owner.exited
	var next *proc
	for next == nil {
		for _, p := range c.live() {
			if r, err := s.postUntilOK(ctx, p); err == nil && r.node != owner.id {
				next = p
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 5 {
		_, err := s.postUntilOK(ctx, next)
		require.NoError(t, err)
	}
	notes, _, err := getNotes(ctx, c, ns, id)
	require.NoError(t, err)
	checkNotes(t, "served", id, s.acks, notes)
	drainAll(t, c)
	restoredN, _ := restoredNotes(t, b, ns, id)
	checkNotes(t, "restored", id, s.acks, restoredN)
	require.Empty(t, s.unexpected)
}
