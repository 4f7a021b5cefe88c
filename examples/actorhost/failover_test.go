package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/stretchr/testify/require"
)

// BenchmarkFailover measures how long an actor is unavailable when its
// owner dies: from SIGKILL of the owner to the first write acknowledged by
// the new owner, for an actor with a 10 MB database. Each iteration is one
// failover on a fresh bucket and two fresh nodes; the caller retries every
// 50 ms (ignoring Retry-After, to measure the server, not the client's
// back-off). Run a few iterations:
//
//	scripts/with-s3.sh go test ./examples/actorhost -run '^$' -bench Failover -benchtime 5x
//
// It reports the median, fastest and slowest failover (seconds; ns/op is
// their mean), and the medians of its two parts: from the kill to the new
// node's claim (claim-median-s), and from the claim to the actor open
// (open-median-s: restore and first snapshot upload). The new node had forwarded requests to the owner before the
// kill, so it had been watching the owner's lease: the failover is about
// lease + grace after the owner's last renewal (so between lease + grace -
// lease/3 and lease + grace after the kill), plus the claim, the restore of
// 10 MB and the upload of the new session's first snapshot. Afterwards
// every acknowledged note must be there, as the new owner serves it and
// as the bucket restores it.
func BenchmarkFailover(b *testing.B) { benchFailover(b, false) }

// BenchmarkPeersFailover is BenchmarkFailover with acknowledgement by
// followers (peerFlags) at the default timings, where the takeover comes
// from failure detection (quorum.Suspicion), not from the lease: the
// owner killed (signal=kill, SIGKILL) or paused (signal=stop, SIGSTOP,
// resumed once the heir served a write). Five nodes, the actor's owner
// and its three followers (quorum two), uploads at most every 10 s. Just before the
// kill the owner's last writes (failoverTail notes and the new node's
// forwarded writes) are acknowledged by the followers and not yet in the
// bucket (the owner's /status says so). The new node is the one that is
// not a follower, so the tail reaches it over the network: its claim
// fences the followers and recovers the tail from them before the actor
// opens, which its log must report.
//
//	scripts/with-s3.sh go test ./examples/actorhost -run '^$' -bench PeersFailover -benchtime 10x
func BenchmarkPeersFailover(b *testing.B) { benchFailover(b, true) }

func benchFailover(b *testing.B, peers bool) {
	type variant struct {
		name  string
		flags []string
		stop  bool // SIGSTOP the owner, not SIGKILL
	}
	variants := []variant{
		{"timing=default", []string{"-lease", "10s", "-grace", "5s"}, false},
		{"timing=short", []string{"-lease", "1s", "-grace", "500ms"}, false},
	}
	if peers {
		// Failure detection, at the defaults: no timing flag.
		variants = []variant{{"signal=kill", nil, false}, {"signal=stop", nil, true}}
	}
	for _, tm := range variants {
		for _, be := range buckettest.Backends() {
			b.Run(tm.name+"/bucket="+be.Name, func(b *testing.B) {
				// b.Loop runs the function once, so -benchtime 5x is five
				// failovers, not a first one thrown away and five more.
				// The timer means nothing here (ns/op is reported below).
				var samples []failover
				for b.Loop() {
					samples = append(samples, failoverOnce(b, be.New(b), tm.flags, peers, tm.stop))
				}
				var sum time.Duration
				for _, f := range samples {
					sum += f.total
				}
				b.ReportMetric(float64(sum.Nanoseconds())/float64(len(samples)), "ns/op")
				report := func(unit string, part func(failover) time.Duration) {
					ds := make([]time.Duration, len(samples))
					for i, f := range samples {
						ds[i] = part(f)
					}
					slices.Sort(ds)
					b.ReportMetric(ds[len(ds)/2].Seconds(), unit)
					if unit == "median-s" {
						b.ReportMetric(ds[0].Seconds(), "min-s")
						b.ReportMetric(ds[len(ds)-1].Seconds(), "max-s")
					}
				}
				report("median-s", func(f failover) time.Duration { return f.total })
				report("claim-median-s", func(f failover) time.Duration { return f.claim })
				report("open-median-s", func(f failover) time.Duration { return f.open })
			})
		}
	}
}

// The actor's notes: 11 notes of 960 KiB of hex text, a database of about
// 10 MB, then failoverTail small ones just before the kill.
const (
	failoverNotes     = 11
	failoverNoteBytes = 960 << 10
	failoverTail      = 5
	// failoverAttempt bounds each attempt of the caller during the
	// failover (then it sends the next), as a caller with a per-attempt
	// timeout would. (Until host/http.go ended the body's read deadline
	// with the body, a request that waited in the heir past
	// host.DefaultBodyTimeout was answered 200 with no body.)
	failoverAttempt = 5 * time.Second
)

// failover is one measurement: from the kill to the first acknowledged
// write, and its parts as the heir's log tells them: until the heir's claim
// (fencing the dead owner included), and from the claim to the actor being
// open (restore, the tail from the followers, first snapshot).
type failover struct {
	total, claim, open time.Duration
}

func failoverOnce(b *testing.B, bk bucket.Bucket, timing []string, peers, stop bool) failover {
	ctx := b.Context()
	const ns, id = "bench", "big"
	flags, nodes := append(slices.Clone(timing), "-idle", "10m"), 2
	if peers {
		flags, nodes = append(flags, peerFlags(b)...), 5
	}
	c := newCluster(b, bk, flags...)
	ps := c.startN(nodes)
	owner, heir := ps[0], ps[1]
	s := &stream{ns: ns, id: id, pad: failoverNoteBytes}
	post := func(what string) {
		if r, body := s.post(ctx, owner); r.err != nil || r.status != http.StatusOK || r.node != owner.id {
			b.Fatalf("%s %.20q: %v", what, body, r)
		}
	}
	for range failoverNotes {
		post("filling")
	}
	if peers {
		heir = nonFollower(b, bk, ns, id, ps)
		// Everything so far reaches the bucket: the next upload starts
		// no sooner than the upload interval (10 s) after this one did,
		// which leaves the seconds the tail and the kill take.
		captured, _, err := actorSeqs(ctx, owner, ns, id)
		require.NoError(b, err)
		if !waitFor(ctx, hangGuard, func() bool {
			_, durable, err := actorSeqs(ctx, owner, ns, id)
			return err == nil && durable >= captured
		}) {
			b.Fatalf("the bucket never got commit %d\n%s", captured, owner.logTail(20))
		}
	}
	// The heir forwards a few requests to the owner: it has seen the
	// owner's lease, as a node of a busy cluster would have.
	for ok := 0; ok < 3; {
		r := do(ctx, http.MethodPost, actorURL(heir, ns, id, "counter"), "")
		switch {
		case r.err == nil && r.status == http.StatusOK && r.node == owner.id:
			ok++
		case r.err == nil && r.status == http.StatusServiceUnavailable:
		default:
			b.Fatalf("a write through the heir: %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.pad = 0
	for range failoverTail {
		post("the tail")
	}
	if peers {
		captured, durable, err := actorSeqs(ctx, owner, ns, id)
		require.NoError(b, err)
		if captured < durable+failoverTail {
			b.Fatalf("the bucket holds commit %d of %d: the tail is not only at the followers", durable, captured)
		}
	}
	killed := time.Now()
	if stop {
		owner.stop()
	} else {
		owner.kill()
	}
	for {
		actx, cancel := context.WithTimeout(ctx, failoverAttempt)
		r := do(actx, http.MethodPost, actorURL(heir, ns, id, "counter"), "")
		cancel()
		if r.err == nil && r.status == http.StatusOK {
			if r.node != heir.id {
				b.Fatalf("%v after the kill, %q served by %s", time.Since(killed).Round(time.Millisecond), r.body, c.nodeName(r.node))
			}
			break
		}
		if r.err == nil && r.status != http.StatusServiceUnavailable || heir.isDown() {
			b.Fatalf("during the failover: %v\n%s", r, heir.logTail(20))
		}
		if time.Since(killed) > 5*time.Minute {
			b.Fatalf("no failover after %v: %v", time.Since(killed), r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := failover{total: time.Since(killed)}
	if stop {
		// The zombie comes back: whatever it does, it must not take
		// anything acknowledged away (package fence, "Proof of
		// ownership"; its followers are fenced).
		owner.cont()
		time.Sleep(time.Second)
	}
	notes, _, err := getNotes(ctx, c, ns, id)
	require.NoError(b, err)
	checkNotes(b, "served", id, s.acks, notes)
	notes, _ = restoredNotes(b, bk, ns, id)
	checkNotes(b, "restored", id, s.acks, notes)
	c.cleanup() // every node of this iteration gone; the heir's log complete
	var claimed, opened time.Time
	tail := 0
	for _, line := range strings.Split(heir.logTail(1000), "\n") {
		at, _ := time.Parse(time.RFC3339Nano, strings.TrimPrefix(strings.Fields(line + " x")[0], "time="))
		switch {
		case strings.Contains(line, `msg="claimed actor"`):
			claimed = at
		case strings.Contains(line, `msg="actor open"`):
			opened = at
		case strings.Contains(line, `msg="restored from the bucket"`):
			b.Logf("the heir restored bytes=%s", logValue(line, "bytes"))
		case strings.Contains(line, `msg="takeover recovered a tail"`):
			tail, _ = strconv.Atoi(logValue(line, "entries"))
		}
	}
	if peers && tail < failoverTail {
		b.Fatalf("the heir recovered a tail of %d commits from the followers, not the %d or more the bucket lacked\n%s",
			tail, failoverTail, heir.logTail(30))
	}
	if !claimed.IsZero() && !opened.IsZero() {
		f.claim, f.open = claimed.Sub(killed), opened.Sub(claimed)
	}
	from := ""
	if peers {
		from = fmt.Sprintf(" (a tail of %d commits from the followers)", tail)
	}
	b.Logf("failover %v: claim after %v, open %v later%s",
		f.total.Round(time.Millisecond), f.claim.Round(time.Millisecond), f.open.Round(time.Millisecond), from)
	return f
}

// nonFollower returns a node of ps, not the owner ps[0], that is not one
// of the followers the actor's own.json records; it fails b unless that
// records three.
func nonFollower(b testing.TB, bk bucket.Bucket, ns, id string, ps []*proc) *proc {
	b.Helper()
	rec, _, err := fence.ReadRecord(b.Context(), bk, actorOf(ns, id))
	require.NoError(b, err)
	require.Len(b, rec.Followers, 3, "the followers of %s/%s", ns, id)
	for _, p := range ps[1:] {
		if !slices.Contains(rec.Followers, followerID(b, p)) {
			return p
		}
	}
	b.Fatalf("every node follows %s/%s: %v", ns, id, rec.Followers)
	return nil
}

// logValue returns the value of key in a log line of slog's text handler
// ("" if absent).
func logValue(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}
