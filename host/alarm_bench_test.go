package host

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
)

// BenchmarkAlarmLateness measures how late alarms run, from their time to
// the start of their handler, across three alarm children on 127.0.0.1:
//
//   - holder=live: each round, 40 actors get an alarm through node A (which
//     then holds them), due 1 to 6 s after it is set; A runs them.
//   - holder=killed: each round, a new node A gets 10 actors with alarms
//     due 0 to 2 s after A is SIGKILLed; B or C runs them.
//
// It reports the median, the 99th percentile and the maximum over every
// alarm of every round (b.N rounds), with the default lease + grace (10 s
// + 5 s, scans every 2 s) and with the tests' 1 s + 0.5 s (scans every
// 200 ms). Run it by hand (see BENCHMARKS.md); it asserts no time.
func BenchmarkAlarmLateness(b *testing.B) {
	timings := []struct {
		name                string
		lease, grace, every time.Duration
	}{
		{"lease=10s+5s", fence.DefaultLease, fence.DefaultGrace, DefaultAlarmScanEvery},
		{"lease=1s+0.5s", time.Second, 500 * time.Millisecond, 200 * time.Millisecond},
	}
	for _, be := range buckettest.Backends() {
		for _, tm := range timings {
			env := fmt.Sprintf("%s=%v %v %v", envAlarmTimings, tm.lease, tm.grace, tm.every)
			b.Run(be.Name+"/"+tm.name+"/holder=live", func(b *testing.B) {
				c := newAlarmCluster(b, be.New(b))
				a := c.start("A", env)
				c.start("B", env)
				c.start("C", env)
				var late []time.Duration
				round := 0
				for b.Loop() {
					round++
					late = append(late, lateness(b, c, a, fmt.Sprintf("live-%d-", round), 40, time.Second, 5*time.Second, nil)...)
				}
				reportLateness(b, late)
			})
			b.Run(be.Name+"/"+tm.name+"/holder=killed", func(b *testing.B) {
				c := newAlarmCluster(b, be.New(b))
				c.start("B", env)
				c.start("C", env)
				var late []time.Duration
				round := 0
				for b.Loop() {
					round++
					a := c.start(fmt.Sprintf("A%d", round), env)
					late = append(late, lateness(b, c, a, fmt.Sprintf("killed-%d-", round), 10, 500*time.Millisecond, 2*time.Second, a)...)
				}
				reportLateness(b, late)
			})
		}
	}
}

// lateness sets n alarms through holder (actors prefix0..n-1), due from
// wait to wait+spread after the sets are done (after kill is killed, if
// not nil), waits until each ran once, and returns how late each first
// run started.
func lateness(b *testing.B, c *alarmCluster, holder *alarmChild, prefix string, n int, wait, spread time.Duration, kill *alarmChild) []time.Duration {
	b.Helper()
	actors := make([]string, n)
	for i := range actors {
		actors[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	// Claim every actor on the holder first (an alarm far away), so that
	// the measured sets are cheap and the times below are where they say.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, id := range actors {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			setAlarm(b, holder, id, time.Now().Add(time.Hour))
		})
	}
	wg.Wait()
	start := time.Now().Add(wait)
	due := map[string]time.Time{}
	for _, id := range actors {
		due[id] = start.Add(rand.N(spread)).Truncate(time.Millisecond)
	}
	for _, id := range actors {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			require.Equal(b, holder.node, setAlarm(b, holder, id, due[id]), "holder of %s", id)
		})
	}
	wg.Wait()
	if kill != nil {
		if d := time.Until(start); d > 0 {
			time.Sleep(d)
		}
		kill.kill()
	}
	out := make([]time.Duration, 0, n)
	for _, id := range actors {
		c.waitOK(id)
		var first *alarmEvent
		for _, e := range c.kind(id, "run") {
			if e.due == due[id].UnixMilli() {
				first = &e
				break
			}
		}
		require.NotNil(b, first, "%s ran, but not for its time\n%s", id, c.dump())
		out = append(out, first.at.Sub(due[id]))
	}
	if !strings.HasPrefix(c.lost(), "no node") {
		b.Logf("%s", c.lost())
	}
	return out
}

func reportLateness(b *testing.B, late []time.Duration) {
	slices.Sort(late)
	q := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	b.ReportMetric(q(0.5).Seconds(), "median-s")
	b.ReportMetric(q(0.99).Seconds(), "p99-s")
	b.ReportMetric(late[len(late)-1].Seconds(), "max-s")
	b.ReportMetric(float64(len(late)), "alarms")
	b.Logf("%d alarms: min %v, median %v, p99 %v, max %v", len(late), late[0], q(0.5), q(0.99), late[len(late)-1])
}
