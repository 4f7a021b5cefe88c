package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
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
// 10 MB and the upload of the new session's first snapshot.
func BenchmarkFailover(b *testing.B) {
	for _, tm := range []struct {
		name  string
		flags []string
	}{
		{"timing=default", []string{"-lease", "10s", "-grace", "5s"}},
		{"timing=short", []string{"-lease", "1s", "-grace", "500ms"}},
	} {
		for _, be := range buckettest.Backends() {
			b.Run(tm.name+"/bucket="+be.Name, func(b *testing.B) {
				var samples []failover
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					samples = append(samples, failoverOnce(b, be.New(b), tm.flags))
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
// 10 MB.
const (
	failoverNotes     = 11
	failoverNoteBytes = 960 << 10
)

// failover is one measurement: from the kill to the first acknowledged
// write, and its parts as the heir's log tells them: until the heir's claim
// (fencing the dead owner included), and from the claim to the actor being
// open (restore and first snapshot).
type failover struct {
	total, claim, open time.Duration
}

func failoverOnce(b *testing.B, bk bucket.Bucket, timing []string) failover {
	ctx := b.Context()
	c := newCluster(b, bk, append(timing, "-idle", "10m")...)
	ps := c.startN(2)
	owner, heir := ps[0], ps[1]
	raw := make([]byte, failoverNoteBytes/2)
	for i := range failoverNotes {
		rand.Read(raw)
		if r := do(ctx, http.MethodPost, actorURL(owner, "bench", "big", "notes"), hex.EncodeToString(raw)); r.status != http.StatusOK || r.node != owner.id {
			b.Fatalf("filling note %d: %v", i, r)
		}
	}
	// The heir forwards a few requests to the owner: it has seen the
	// owner's lease, as a node of a busy cluster would have.
	for ok := 0; ok < 3; {
		r := do(ctx, http.MethodPost, actorURL(heir, "bench", "big", "counter"), "")
		switch {
		case r.err == nil && r.status == http.StatusOK && r.node == owner.id:
			ok++
		case r.err == nil && r.status == http.StatusServiceUnavailable:
		default:
			b.Fatalf("a write through the heir: %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StartTimer()
	killed := time.Now()
	owner.kill()
	for {
		r := do(ctx, http.MethodPost, actorURL(heir, "bench", "big", "counter"), "")
		if r.err == nil && r.status == http.StatusOK {
			if r.node != heir.id {
				b.Fatalf("after the kill, served by %s", c.nodeName(r.node))
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
	b.StopTimer()
	heir.kill()
	heir.wait(hangGuard)
	var claimed, opened time.Time
	for _, line := range strings.Split(heir.logTail(1000), "\n") {
		at, _ := time.Parse(time.RFC3339Nano, strings.TrimPrefix(strings.Fields(line + " x")[0], "time="))
		switch {
		case strings.Contains(line, `msg="claimed actor"`):
			claimed = at
		case strings.Contains(line, `msg="actor open"`):
			opened = at
		case strings.Contains(line, `msg="restored from the bucket"`):
			if i := strings.Index(line, " bytes="); i >= 0 {
				b.Logf("the heir restored %s", line[i+1:])
			}
		}
	}
	if !claimed.IsZero() && !opened.IsZero() {
		f.claim, f.open = claimed.Sub(killed), opened.Sub(claimed)
	}
	b.Logf("failover %v: claim after %v, open %v later", f.total.Round(time.Millisecond), f.claim.Round(time.Millisecond), f.open.Round(time.Millisecond))
	return f
}
