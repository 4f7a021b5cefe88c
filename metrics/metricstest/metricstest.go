// Package metricstest reads metrics in tests: a scrape of Prometheus
// metric families by name, gathered from a collector or parsed from the
// text exposition a node serves on /metrics, and the value of one series
// in it. It asserts nothing of its own but that the series asked for
// exists, and it must never be imported outside a _test.go file.
package metricstest

import (
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one scrape's metric families, by metric name.
type Scrape map[string]*dto.MetricFamily

// Gather registers c with a new pedantic registry (which fails a
// collector that collects what it did not describe) and gathers it.
func Gather(t testing.TB, c prometheus.Collector) Scrape {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("register: %v", err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	s := Scrape{}
	for _, f := range fams {
		s[f.GetName()] = f
	}
	return s
}

// Parse reads a scrape in the text exposition format.
func Parse(t testing.TB, r io.Reader) Scrape {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parsing the text exposition: %v", err)
	}
	return fams
}

// Value is the value of the series of name with exactly labels (name,
// value pairs): a counter's or gauge's value, a histogram's or summary's
// sample count. It fails the test if there is no such series.
func (s Scrape) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	f, ok := s[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// hasLabels reports whether m's labels are exactly labels (name, value
// pairs, in any order).
func hasLabels(m *dto.Metric, labels []string) bool {
	if len(m.GetLabel()) != len(labels)/2 {
		return false
	}
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
