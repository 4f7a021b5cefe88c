package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/host"
	"github.com/framectl/framectl/peer"
)

// config is the command line.
type config struct {
	listen    string        // host:port to bind
	advertise string        // host:port peers forward to ("" = the bound address)
	bucketURL string        // where every node's actors live
	dataDir   string        // this process's local copies
	lease     time.Duration // fence.Options.Lease
	grace     time.Duration // fence.Options.Grace
	idle      time.Duration // hibernate an actor idle this long
	drain     time.Duration // bound on a SIGTERM drain
	request   time.Duration // bound on one request (host.HandlerOptions.RequestTimeout)
	maxOpens  int           // host.Config.MaxOpens
	sweepAge  time.Duration // host.Config.SweepAge; 0: never sweep
	recover   bool          // a lost node is replaced in-process (else exit 3)
	compact   bool          // sessions compact the actors held (size rule, tier pass)
	// alarmNamespaces are the namespaces whose alarms this node runs
	// (host.Config.Alarms): every node of a cluster should name the same.
	alarmNamespaces map[string]bool
	logLevel        slog.Level
	// Acknowledgement by followers (host.PeersConfig): on when peerListen
	// is set.
	peerListen    string
	peerAdvertise string
	keyFile       string // the cluster key: a file of peer.MinKeyBytes or more bytes
	followers     int
	quorum        int
	upload        time.Duration // session.Config.UploadInterval (0: the session.s default)
	heartbeat     time.Duration // host.PeersConfig.Heartbeat
	suspectAfter  time.Duration // host.PeersConfig.SuspectAfter
	faultSignals  bool          // SIGUSR1 cuts the follower transport (host.Host.CutPeers)
}

const usageText = `actorhost: an HTTP server hosting actors, each one replicated SQLite
database, on nodes that share one bucket.

  actorhost -listen 127.0.0.1:8081 -bucket file:///tmp/actors -data /tmp/node1

Routes:
  POST /actor/NS/ID/notes     append a note (body = text), returns {"id":N}
  GET  /actor/NS/ID/notes     all notes, [{"id":N,"body":"..."}...]
  POST /actor/NS/ID/counter   increment, returns {"value":N}
  PUT  /actor/NS/ID/alarm     set the alarm (body = RFC 3339 time, or a
                              duration from now: 90s), returns {"due":...,"generation":N}
  GET  /actor/NS/ID/alarm     the alarm, or 404
  DELETE /actor/NS/ID/alarm   delete the alarm
  GET  /status                this node and the actors it holds
  GET  /metrics               this node's Prometheus metrics (go doc ./metrics)

An alarm that runs appends a note "alarm <due> (generation G, retry R)";
alarms run only in the namespaces of -alarm-namespaces.

Exit codes: 0 drained after SIGTERM; 1 runtime failure (listener, a flush
during the drain); 2 usage; 3 fenced or lease lost with -recover=false, or
during the drain (restart it: it comes back as a new node).
`

// exit codes; see usageText.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitFenced  = 3
)

// errUsage marks command-line errors.
var errUsage = errors.New("usage")

func parseConfig(args []string, stderr io.Writer) (config, error) {
	c := config{logLevel: slog.LevelInfo}
	fs := flag.NewFlagSet("actorhost", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "`host:port` to serve on; also the address advertised in the node's lease (port 0 picks one)")
	fs.StringVar(&c.advertise, "advertise", "", "`host:port` peers forward requests to, when -listen binds a wildcard address (default: the bound address)")
	fs.StringVar(&c.bucketURL, "bucket", "", "bucket `URL` shared by every node: s3://BUCKET/PREFIX?endpoint=HOST:PORT or file:///DIR")
	fs.StringVar(&c.dataDir, "data", "", "`dir`ectory of this process's local copies (one process per directory)")
	fs.DurationVar(&c.lease, "lease", fence.DefaultLease, "node lease: acknowledgements stop this long after the last renewal began")
	fs.DurationVar(&c.grace, "grace", fence.DefaultGrace, "how much longer than -lease peers wait before they fence a silent node")
	fs.DurationVar(&c.idle, "idle", host.DefaultIdle, "release (hibernate) an actor that has had no request for this long")
	fs.DurationVar(&c.drain, "drain-timeout", 25*time.Second, "bound on finishing requests and flushing actors after SIGTERM")
	fs.DurationVar(&c.request, "request-timeout", host.DefaultRequestTimeout, "bound on one request: its body, waiting for a claim, running it, its answer")
	fs.IntVar(&c.maxOpens, "max-opens", host.DefaultMaxOpens, "opens (claim, restore, first snapshot) running at once")
	fs.DurationVar(&c.sweepAge, "sweep-age", host.DefaultSweepAge, "delete leases older than this of nodes no actor names, every few minutes (0: never)")
	fs.BoolVar(&c.recover, "recover", true, "after losing the lease, register a new node and reopen the actors instead of exiting 3")
	fs.BoolVar(&c.compact, "compact", true, "compact the actors this node holds in the background (size rule; tier pass as each session starts)")
	fs.StringVar(&c.peerListen, "peer-listen", "", "`host:port` of the follower transport: acknowledge writes once -followers peers hold them (port 0 picks one; empty: by the bucket alone)")
	fs.StringVar(&c.peerAdvertise, "peer-advertise", "", "`host:port` peers dial for the follower transport, when -peer-listen binds a wildcard address")
	fs.StringVar(&c.keyFile, "cluster-key-file", "", "`file` holding the cluster key every node shares (32 random bytes or more); required with -peer-listen")
	fs.IntVar(&c.followers, "followers", 3, "followers per actor with -peer-listen")
	fs.IntVar(&c.quorum, "quorum", 0, "followers that must hold a write before it is acknowledged (0: a majority of -followers)")
	fs.DurationVar(&c.heartbeat, "heartbeat", peer.DefaultHeartbeat, "with -peer-listen: how often a node beats on an idle connection with a peer")
	fs.DurationVar(&c.suspectAfter, "suspect-after", peer.DefaultSuspectAfter, "with -peer-listen: an owner its followers and this node have not heard for this long is taken over without waiting for its lease (at least 2×-heartbeat)")
	fs.BoolVar(&c.faultSignals, "fault-signals", false, "for tests of a partition: SIGUSR1 cuts this node's follower transport for good (its HTTP server and lease stay)")
	fs.DurationVar(&c.upload, "upload-interval", 0, "shortest interval between uploads nobody waits for (0: the default, 10s with -peer-listen)")
	var alarmNS string
	fs.StringVar(&alarmNS, "alarm-namespaces", "", "comma-separated `namespaces` whose actors' alarms this node runs (give every node the same)")
	fs.TextVar(&c.logLevel, "log", slog.LevelInfo, "log `level`: debug, info, warn, error")
	usage := func(format string, a ...any) (config, error) {
		fmt.Fprintf(stderr, "actorhost: %s\n  try: actorhost -listen 127.0.0.1:8081 -bucket file:///tmp/actors -data /tmp/node1\n  (actorhost -h for help)\n", fmt.Sprintf(format, a...))
		return c, errUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText, "\nFlags:\n")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return c, flag.ErrHelp
		}
		return usage("%v", err)
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case c.bucketURL == "":
		return usage("-bucket is required")
	case c.dataDir == "":
		return usage("-data is required")
	case c.lease <= 0 || c.grace <= 0:
		return usage("-lease and -grace must be positive")
	case c.idle <= 0:
		return usage("-idle must be positive")
	case c.drain <= 0:
		return usage("-drain-timeout must be positive")
	case c.request <= 0:
		return usage("-request-timeout must be positive")
	case c.maxOpens <= 0:
		return usage("-max-opens must be positive")
	case c.sweepAge < 0, c.sweepAge > 0 && c.sweepAge < 2*(c.lease+c.grace):
		return usage("-sweep-age must be 0 (never) or at least 2×(-lease + -grace)")
	case c.peerListen != "" && c.keyFile == "":
		return usage("-peer-listen needs -cluster-key-file")
	case c.followers < 1 || c.quorum < 0 || c.quorum > c.followers:
		return usage("-followers must be positive and -quorum from 0 to -followers")
	case c.upload < 0:
		return usage("-upload-interval must not be negative")
	case c.heartbeat <= 0 || c.suspectAfter < 2*c.heartbeat:
		return usage("-heartbeat must be positive and -suspect-after at least twice it")
	}
	c.alarmNamespaces = map[string]bool{}
	for _, ns := range strings.Split(alarmNS, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if !namespacePattern.MatchString(ns) {
			return usage("-alarm-namespaces: %q is not a namespace (1 to 64 of A-Z a-z 0-9 _ -)", ns)
		}
		c.alarmNamespaces[ns] = true
	}
	if _, _, err := net.SplitHostPort(c.listen); err != nil {
		return usage("-listen %q: %v", c.listen, err)
	}
	if c.advertise != "" {
		if err := checkAdvertised(c.advertise); err != nil {
			return usage("-advertise: %v", err)
		}
	}
	return c, nil
}

// checkAdvertised refuses an address peers could not forward to: no host,
// or a wildcard one (0.0.0.0, ::), or no port.
func checkAdvertised(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if port == "" || port == "0" {
		return fmt.Errorf("%q has no port", addr)
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); host == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q is not an address peers can reach: set -advertise", addr)
	}
	return nil
}
