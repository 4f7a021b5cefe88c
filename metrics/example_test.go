package metrics_test

import (
	"context"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/metrics"
)

// A runtime observes its bucket and databases before it starts its host,
// watches the host, and serves the registry.
func Example() {
	ctx := context.Background()
	b, err := bucket.Open(ctx, "file:///var/lib/actors/bucket")
	if err != nil {
		log.Fatal(err)
	}
	m := metrics.New()
	h, err := host.New(ctx, m.Instrument(host.Config{Bucket: b, Address: "10.0.0.5:8080", Dir: "/var/lib/actors/node"}))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	m.Watch(h)

	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// ... the runtime's routes, then http.Serve with mux.
}
