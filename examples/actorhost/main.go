// Command actorhost is a small actor runtime on framectl: an HTTP server
// whose actors each own one replicated SQLite database, on any number of
// nodes that share one bucket. A node serves the actors it holds, forwards
// requests for actors another live node holds, takes over the actors of a
// node that died once its lease has run out, hibernates idle actors, and
// hands its actors over when it is told to stop (SIGTERM).
//
// It is the example a runtime is meant to copy: every mutating response
// leaves only after vfs.DB.Durable says the write is in the bucket (the
// output gate), and a node whose lease is gone stops serving and exits.
// See README.md for what callers and operators see.
//
// Files: config.go (flags), main.go (wiring), host.go (the actor map and
// actor lifecycle), actor.go (one actor's database and operations),
// handlers.go (routes and the output gate), forward.go (forwarding to the
// holder), drain.go (SIGTERM and fenced exits), lock_unix.go (one process
// per data directory).
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
	"github.com/framectl/framectl/fence"
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
// node stops being live (then abandons every actor), and returns the exit
// code. Tests run it in-process.
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
	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return fail(err)
	}
	unlock, err := lockDataDir(cfg.dataDir)
	if err != nil {
		return fail(err)
	}
	defer unlock()

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
	node, err := fence.Register(ctx, b, addr, fence.Options{Lease: cfg.lease, Grace: cfg.grace, Logger: log})
	if err != nil {
		return fail(err)
	}
	log = log.With(logNode, node.ID())

	h := newHost(cfg, b, node, log)
	srv := &http.Server{
		Handler:           h.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	go h.tickLoop()
	// One line on stdout for scripts and the tests: where, and who.
	fmt.Fprintf(stdout, "listening %s node %s\n", addr, node.ID())
	log.Info("serving", logAddress, addr, "bucket", b.String(), "data", filepath.Clean(cfg.dataDir),
		"lease", cfg.lease, "grace", cfg.grace, "idle", cfg.idle)

	select {
	case <-ctx.Done():
		return h.drain(srv)
	case <-node.Done():
		return h.abandon(srv)
	case err := <-serveErr:
		log.Error("listener failed", logErr, err)
		if code := h.drain(srv); code != exitOK {
			return code
		}
		return exitFailure
	}
}

// Log keys.
const (
	logErr       = "err"
	logNode      = "node"
	logNamespace = "namespace"
	logActor     = "actor"
	logEpoch     = "epoch"
	logHolder    = "holder"
	logAddress   = "address"
	logPath      = "path"
	logDuration  = "duration"
)
