package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZombie: the owner of some actors is paused (SIGSTOP) while writes to
// it are in flight, past its lease; a peer fences it and takes its actors
// over; then it resumes (SIGCONT). The zombie must acknowledge nothing
// after the fence and leave; its late uploads (objects under its session
// written after the takeover) must never show in a restore (which equals
// the new owner's state); and the tier pass must delete its whole session.
func TestZombie(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) { zombie(t, be.New(t)) })
	}
}

func zombie(t *testing.T, b bucket.Bucket) {
	ctx := t.Context()
	// Nodes run no compaction here, so the zombie's session stays in the
	// bucket until this test's own tier pass, which must delete it; and a
	// node that lost its lease exits instead of coming back as a new
	// node, which would forward what was queued for the zombie to the new
	// owner (TestFencedNodeRecovers covers that).
	c := newCluster(t, b, append(shortTimings, "-compact=false", "-recover=false")...)
	ps := c.startN(3)
	c.startSupervisor()
	z, heir := ps[0], ps[1]
	const ns = "zombie"
	var streams []*stream
	zombieEpoch := map[string]frames.Epoch{}
	for i := range 4 {
		s := &stream{ns: ns, id: fmt.Sprintf("z%d", i)}
		streams = append(streams, s)
		r, err := s.postUntilOK(ctx, z) // z claims it
		require.NoError(t, err)
		require.Equal(t, z.id, r.node, "%s: first write served by %s, not by node0", s.id, c.nodeName(r.node))
		zombieEpoch[s.id] = r.epoch
	}

	// Writers keep two requests per actor in flight to z, so that when it
	// is paused some writes are committed on it but not yet uploaded or
	// acknowledged: what it may upload late.
	hctx, stopHammer := context.WithCancel(ctx)
	var hammer sync.WaitGroup
	for _, s := range streams {
		for range 2 {
			hammer.Add(1)
			go func() {
				defer hammer.Done()
				for hctx.Err() == nil {
					s.post(context.WithoutCancel(hctx), z)
				}
			}()
		}
	}
	time.Sleep(300 * time.Millisecond)
	pauseOutsideCommitLock(t, b, z)
	paused := time.Now()
	stopHammer() // in-flight requests go on: they end when z answers or exits

	// Requests sent to the paused z: it can read them only once it
	// resumes, after the fence, so it must acknowledge none of them.
	type queuedReply struct {
		what string
		r    reply
	}
	var queued sync.WaitGroup
	queuedReplies := make(chan queuedReply, 64)
	for _, s := range streams {
		for k := range 2 {
			queued.Add(1)
			go func() {
				defer queued.Done()
				body := fmt.Sprintf("%s#queued-%d", s.id, k)
				queuedReplies <- queuedReply{"POST " + body, do(ctx, http.MethodPost, actorURL(z, ns, s.id, "notes"), body)}
			}()
		}
		queued.Add(1)
		go func() {
			defer queued.Done()
			queuedReplies <- queuedReply{"GET notes of " + s.id, do(ctx, http.MethodGet, actorURL(z, ns, s.id, "notes"), "")}
		}()
	}

	// The takeover: a request through the heir succeeds once the heir has
	// fenced z (its lease plus grace ran out on the heir's clock).
	for _, s := range streams {
		r, err := s.postUntilOK(ctx, heir)
		require.NoError(t, err)
		if r.node == z.id || r.epoch <= zombieEpoch[s.id] {
			t.Fatalf("%s: after the pause, acknowledged by %s in epoch %d (the zombie held epoch %d)", s.id, c.nodeName(r.node), r.epoch, zombieEpoch[s.id])
		}
	}
	t.Logf("actors taken over %v after the pause", time.Since(paused).Round(time.Millisecond))
	for _, s := range streams {
		for _, p := range ps[1:] {
			_, err := s.postUntilOK(ctx, p)
			require.NoError(t, err)
		}
	}
	// What the zombie's sessions hold at the takeover.
	before := map[string][]string{}
	for _, s := range streams {
		before[s.id] = sessionKeys(t, b, ns, s.id, zombieEpoch[s.id])
	}

	z.cont()
	code, ok := z.wait(hangGuard)
	if !ok {
		t.Fatal("the zombie kept running after it resumed")
	}
	if code != exitFenced {
		t.Errorf("the zombie exited with %d, want %d (fenced)", code, exitFenced)
	}
	queued.Wait()
	hammer.Wait()
	close(queuedReplies)
	for q := range queuedReplies {
		if q.r.err == nil && q.r.status == http.StatusOK {
			t.Errorf("the zombie answered %s with 200 after the fence (node %s, epoch %d): %s", q.what, c.nodeName(q.r.node), q.r.epoch, q.r.body)
		}
	}
	for _, s := range streams {
		for _, a := range s.acks {
			if a.node == z.id && a.sent.After(paused) {
				t.Errorf("%s: the zombie acknowledged %q, sent while it was paused", s.id, a.body)
			}
		}
	}

	for _, s := range streams {
		for _, u := range append(s.unexpected, s.connErrs.unexpected()...) {
			t.Errorf("%s: unexpected answer: %s", s.id, u)
		}
	}

	late := 0
	for _, s := range streams {
		for _, k := range sessionKeys(t, b, ns, s.id, zombieEpoch[s.id]) {
			if !slices.Contains(before[s.id], k) {
				late++
				t.Logf("%s: late upload by the zombie: %s", s.id, k)
			}
		}
	}
	t.Logf("the zombie uploaded %d objects after the takeover", late)

	for _, s := range streams {
		checkEpochs(t, c, s.id, s.acks)
		gctx, cancel := context.WithTimeout(ctx, hangGuard)
		served, _, err := getNotes(gctx, c, ns, s.id)
		cancel()
		require.NoError(t, err)
		checkNotes(t, "served", s.id, s.acks, served)
		restored, res := restoredNotes(t, b, ns, s.id)
		if res.Epoch <= zombieEpoch[s.id] {
			t.Errorf("%s: restore chose session %d, the zombie's was %d", s.id, res.Epoch, zombieEpoch[s.id])
		}
		if !slices.Equal(served, restored) {
			t.Errorf("%s: restore differs from the new owner's state:\nserved   %v\nrestored %v", s.id, served, restored)
		}
		for _, n := range restored {
			if strings.Contains(n.Body, "#queued-") {
				t.Errorf("%s: a note sent to the paused zombie is in the restore: %q", s.id, n.Body)
			}
		}

		// The tier pass deletes the zombie's session, late uploads and all.
		_, err = compact.Actor(ctx, b, actorOf(ns, s.id), compact.Options{ScratchDir: t.TempDir()})
		require.NoError(t, err, "%s: compaction", s.id)
		if left := sessionKeys(t, b, ns, s.id, zombieEpoch[s.id]); len(left) > 0 {
			t.Errorf("%s: the tier pass left the zombie's objects: %v", s.id, left)
		}
		again, _ := restoredNotes(t, b, ns, s.id)
		assert.Equal(t, served, again, "%s: after the tier pass, restore differs from the owner's state", s.id)
	}
}

// sessionKeys lists the objects of one session of an actor.
func sessionKeys(t testing.TB, b bucket.Bucket, ns, id string, epoch frames.Epoch) []string {
	t.Helper()
	inv, err := restore.Take(t.Context(), b, actorOf(ns, id))
	require.NoError(t, err)
	var keys []string
	if s, ok := inv.Session(epoch); ok {
		for _, o := range append(s.Snapshots, s.Batches...) {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

// pauseOutsideCommitLock pauses p (SIGSTOP). On Linux the directory bucket
// locks each key on its own (see Locks on bucket.Dir): a process paused
// inside a commit delays only that key, and the flock probe below succeeds
// at once, so p is paused wherever it is. Where the bucket falls back to
// one flock(2) on .framectl/lock (macOS, the BSDs), a process paused while
// it holds that lock stalls every other writer, lease renewals included, so
// every node would lose its lease: there p is paused again until it is
// caught outside the lock.
func pauseOutsideCommitLock(t *testing.T, b bucket.Bucket, p *proc) {
	t.Helper()
	u, err := url.Parse(b.String())
	if err != nil || u.Scheme != "file" {
		p.stop()
		return
	}
	f, err := os.OpenFile(filepath.Join(u.Path, ".framectl", "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	for range 1000 {
		p.stop()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return
		}
		p.cont()
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
	}
	t.Fatal("could not pause the node outside the directory bucket's commit lock")
}
