package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/metrics"
	"github.com/framectl/framectl/session"
)

// server is one node: the library's host (claims, forwarding, hibernation,
// recovery, the locks) and this runtime's routes on it.
type server struct {
	cfg     config
	host    *host.Host
	log     *slog.Logger
	metrics *prometheus.Registry // served at /metrics
}

// newServer locks the data directory, registers the node at addr (where
// peers forward to) and starts hosting. An error matching host.ErrLocked
// means another process uses the data directory.
func newServer(ctx context.Context, cfg config, b bucket.Bucket, addr string, log *slog.Logger) (*server, error) {
	sweepAge := cfg.sweepAge
	if sweepAge == 0 {
		sweepAge = -1 // the flag's "never"
	}
	// The node's metrics observe its bucket and databases from the start
	// (package metrics): every request to the bucket, every Durable.
	var peers *host.PeersConfig
	if cfg.peerListen != "" {
		key, err := os.ReadFile(cfg.keyFile)
		if err != nil {
			return nil, fmt.Errorf("-cluster-key-file: %w", err)
		}
		peers = &host.PeersConfig{Listen: cfg.peerListen, Advertise: cfg.peerAdvertise, Key: key,
			Followers: cfg.followers, Quorum: cfg.quorum, Heartbeat: cfg.heartbeat, SuspectAfter: cfg.suspectAfter}
	}
	m := metrics.New()
	h, err := host.New(ctx, m.Instrument(host.Config{
		Bucket:         b,
		Address:        addr,
		Dir:            filepath.Clean(cfg.dataDir),
		Lease:          cfg.lease,
		Grace:          cfg.grace,
		Idle:           cfg.idle,
		MaxOpens:       cfg.maxOpens,
		SweepAge:       sweepAge,
		StopOnNodeLoss: !cfg.recover,
		VFS: session.Config{
			// the session compacts the actor in the background: the size rule
			// after uploads, and the tier pass as each session starts.
			DisableCompaction: !cfg.compact,
			UploadInterval:    cfg.upload,
		},
		Peers:  peers,
		Hooks:  actorHooks(cfg.alarmNamespaces),
		Alarms: alarmHandlers(cfg.alarmNamespaces),
		Logger: log,
	}))
	if err != nil {
		return nil, err
	}
	m.Watch(h)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &server{cfg: cfg, host: h, log: log, metrics: reg}, nil
}
