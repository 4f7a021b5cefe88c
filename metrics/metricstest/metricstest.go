// Package metricstest reads metrics in tests: a scrape of Prometheus
// metric families by name, gathered from a collector or parsed from the
// text exposition a node serves on /metrics, and the value of one series
// in it. It asserts nothing of its own but that the series asked for
// exists, and it must never be imported outside a _test.go file.
package metricstest

import (
	"fmt"
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
	s, err := ParseText(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ParseText is Parse without a test.
func ParseText(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the text exposition: %w", err)
	}
	return fams, nil
}

// Value is the value of the series of name with exactly labels (name,
// value pairs): a counter's or gauge's value, a histogram's or summary's
// sample count. It fails the test if there is no such series.
func (s Scrape) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	if _, ok := s[name]; !ok {
		t.Fatalf("no metric %s", name)
	}
	v, ok := s.Find(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// Find is Value without a test: ok is false if there is no such series.
func (s Scrape) Find(name string, labels ...string) (v float64, ok bool) {
	for _, m := range s[name].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		}
	}
	return 0, false
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
