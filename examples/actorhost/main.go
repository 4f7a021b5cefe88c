// Command actorhost is a small actor runtime on framectl: an HTTP server
// whose actors each own one replicated SQLite database, on any number of
// nodes that share one bucket. A node serves the actors it holds, forwards
// requests for actors another live node holds, takes over the actors of a
// node that died once its lease has run out, runs actors' alarms (those a
// dead node held too), hibernates idle actors, comes back as a new node
// after losing its lease, and hands its actors over when it is told to
// stop (SIGTERM).
//
// It is the example a runtime is meant to copy, and it is thin: package
// host does the node's work (claims and their retries, one open per actor,
// the bound on opens, hibernation, forwarding once, recovery, the locks of
// the data directory, lease sweeps, running alarms). What is left here is this runtime's:
// its routes and their operations, the output gate (every answer leaves
// only after framectl.DB.Durable says the write is in the bucket), and the
// process (flags, signals, exit codes). See README.md for what callers and
// operators see.
//
// Files: config.go (flags), main.go (wiring), server.go (the host and its
// metrics), actor.go (one actor's database and operations), handlers.go
// (routes and the output gate), alarm.go (the alarm routes and handler),
// drain.go (SIGTERM and fenced exits).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/framectl/framectl/bucket"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal starts the drain; a second one kills at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it serves until ctx ends (then drains) or the
// host stops on its own (its node was lost with -recover=false: then it
// abandons every actor), and returns the exit code. Tests run it
// in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	fail := func(err error) int {
		log.Error("cannot start", logErr, err)
		return exitFailure
	}

	b, err := bucket.Open(ctx, cfg.bucketURL)
	if err != nil {
		return fail(err)
	}
	// Listen before registering: with port 0 the lease must carry the
	// port actually bound.
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fail(err)
	}
	defer ln.Close()
	addr := cfg.advertise
	if addr == "" {
		addr = ln.Addr().String()
		if err := checkAdvertised(addr); err != nil {
			return fail(fmt.Errorf("-listen %s: %w", cfg.listen, err))
		}
	}
	s, err := newServer(ctx, cfg, b, addr, log)
	if err != nil {
		return fail(err)
	}
	node := s.host.Node().ID()
	s.log = log.With(logNode, node)

	srv := &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cfg.faultSignals {
		cut := make(chan os.Signal, 1)
		signal.Notify(cut, syscall.SIGUSR1)
		defer signal.Stop(cut)
		go func() {
			if _, ok := <-cut; ok {
				s.host.CutPeers()
			}
		}()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	// One line on stdout for scripts and the tests: where, and who.
	fmt.Fprintf(stdout, "listening %s node %s\n", addr, node)
	s.log.Info("serving", logAddress, addr, "bucket", b.String(), "data", filepath.Clean(cfg.dataDir),
		"lease", cfg.lease, "grace", cfg.grace, "idle", cfg.idle, "recover", cfg.recover)

	select {
	case <-ctx.Done():
		return s.drain(srv)
	case <-s.host.Done():
		return s.abandon(srv)
	case err := <-serveErr:
		s.log.Error("listener failed", logErr, err)
		if code := s.drain(srv); code != exitOK {
			return code
		}
		return exitFailure
	}
}

// Log keys: the strings framectl's own packages log by
// (internal/logattr, which a runtime outside the module cannot import),
// so that one search finds a node's lines from both.
const (
	logErr       = "err"
	logNode      = "node"
	logAddress   = "address"
	logDuration  = "duration"
	logNamespace = "namespace"
	logActor     = "actor"
)
