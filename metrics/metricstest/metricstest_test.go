package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const exposition = `# TYPE requests_total counter
requests_total{op="get",result="ok"} 3
requests_total{op="get",result="error"} 1
requests_total{op="put",result="ok"} 2
# TYPE pending gauge
pending 7
# TYPE wait_seconds histogram
wait_seconds_bucket{le="1"} 4
wait_seconds_bucket{le="+Inf"} 5
wait_seconds_sum 2.5
wait_seconds_count 5
`

// Value finds the series with exactly the labels asked for, in any
// order, whether the scrape was parsed from text or gathered from a
// collector, and reads a histogram as its count.
func TestValue(t *testing.T) {
	parsed := Parse(t, strings.NewReader(exposition))
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"requests_total", []string{"op", "get", "result", "ok"}, 3},
		{"requests_total", []string{"result", "error", "op", "get"}, 1},
		{"requests_total", []string{"op", "put", "result", "ok"}, 2},
		{"pending", nil, 7},
		{"wait_seconds", nil, 5},
	} {
		if got := parsed.Value(t, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}

	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total", Help: "h"}, []string{"op", "result"})
	c.WithLabelValues("get", "ok").Add(3)
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "lateness_seconds", Help: "h"})
	s.Observe(1)
	s.Observe(2)
	gathered := Gather(t, collectors{c, s})
	if got := gathered.Value(t, "requests_total", "op", "get", "result", "ok"); got != 3 {
		t.Errorf("gathered counter = %v, want 3", got)
	}
	if got := gathered.Value(t, "lateness_seconds"); got != 2 {
		t.Errorf("gathered summary = %v, want its count 2", got)
	}
}

// collectors is several collectors as one.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
