package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Litestream, the replicator framebench versus compares framectl with. It
// is run as its own process (litestream replicate) beside a database the
// benchmark writes through the plain os VFS, as its users run it, and is
// installed with go install into a cache directory the first time: it is
// never a dependency of this module.
const (
	litestreamVersion = "v0.5.18"
	litestreamModule  = "github.com/benbjohnson/litestream/cmd/litestream"
)

// litestreamBinary returns the path of the litestream binary, installing it
// into $HOME/.cache/litestream-<version> when it is not there, and checks
// that it runs and is the version asked for.
func litestreamBinary(ctx context.Context) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(home, ".cache", "litestream-"+litestreamVersion)
	bin := filepath.Join(dir, "litestream")
	if _, err := os.Stat(bin); err != nil {
		fmt.Printf("installing litestream %s into %s (go install; a few minutes on two cores)...\n", litestreamVersion, dir)
		cmd := exec.CommandContext(ctx, "go", "install", litestreamModule+"@"+litestreamVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go install %s@%s: %w", litestreamModule, litestreamVersion, err)
		}
	}
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	if v := strings.TrimSpace(string(out)); v != litestreamVersion {
		return "", fmt.Errorf("%s reports version %q, want %s", bin, v, litestreamVersion)
	}
	return bin, nil
}

// litestreamConfig is one database replicated by one litestream process.
type litestreamConfig struct {
	db       string        // database path
	endpoint string        // S3 endpoint, host:port (the counting proxy)
	bucket   string        // bucket name
	path     string        // key prefix of the replica
	interval time.Duration // 0: Litestream's defaults; else monitor-interval and sync-interval
}

// write writes the YAML configuration to file. Credentials come from the
// AWS_* environment, as for framectl.
//
// An interval sets both monitor-interval (how often Litestream reads the
// WAL into a new L0 file, default 1 s) and the replica's sync-interval (how
// often it uploads new L0 files, default 1 s): a sync interval below the
// monitor interval would find nothing new to upload.
func (c litestreamConfig) write(file string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "logging:\n  level: warn\n  stderr: true\n")
	fmt.Fprintf(&b, "dbs:\n  - path: %s\n", c.db)
	if c.interval > 0 {
		fmt.Fprintf(&b, "    monitor-interval: %s\n", c.interval)
	}
	fmt.Fprintf(&b, "    replica:\n      type: s3\n      bucket: %s\n      path: %s\n      endpoint: http://%s\n      region: %s\n      force-path-style: true\n",
		c.bucket, c.path, c.endpoint, cmp(os.Getenv("AWS_REGION"), "us-east-1"))
	if c.interval > 0 {
		fmt.Fprintf(&b, "      sync-interval: %s\n", c.interval)
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// litestreamProcess is a running litestream replicate.
type litestreamProcess struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startLitestream runs litestream replicate -config cfg, its output to
// logFile.
func startLitestream(bin, cfg, logFile string) (*litestreamProcess, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "replicate", "-config", cfg)
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, litestreamEnv()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &litestreamProcess{cmd: cmd, log: logFile, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	return p, nil
}

// exited reports an early exit of the process, with its log.
func (p *litestreamProcess) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		out, _ := os.ReadFile(p.log)
		return fmt.Errorf("litestream exited (%v): %s", err, out)
	default:
		return nil
	}
}

// stop sends SIGTERM (Litestream syncs what it has and exits) and waits,
// killing it after 30 s.
func (p *litestreamProcess) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("litestream did not exit within 30 s of SIGTERM; killed")
	}
}

// litestreamEnv is the environment without AWS_CA_BUNDLE: with it set,
// Litestream's AWS configuration fails to load ("unable to add custom
// RootCAs HTTPClient") even for a plain-HTTP endpoint, which is all the
// benchmark uses.
func litestreamEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_CA_BUNDLE=") })
}

// ltxTimestamp returns the creation time (Unix milliseconds) in the header
// of an LTX file, Litestream's object format, from its first bytes:
// "LTX1", flags, page size, commit, min and max TXID (8 bytes each), then
// the timestamp, big-endian (superfly/ltx, ltx.go, Header.MarshalBinary).
// Litestream stamps an L0 file with the time it read the WAL for it
// (db.go), so the file holds every commit made before that time.
func ltxTimestamp(head []byte) (int64, bool) {
	if len(head) < 40 || string(head[:4]) != "LTX1" {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(head[32:40])), true
}

// litestreamL0 reports whether key is an L0 file of Litestream's replica
// (<path>/0000/<min>-<max>.ltx): the files its sync writes as the WAL
// grows, and so the ones that make a commit durable. Higher levels are its
// compactions of them.
func litestreamL0(key string) bool {
	return strings.Contains(key, "/0000/") && strings.HasSuffix(key, ".ltx")
}

// litestreamSnapshot reports whether key is a snapshot of Litestream's
// replica (level 9, SnapshotLevel in its litestream.go).
func litestreamSnapshot(key string) bool {
	return strings.Contains(key, "/0009/") && strings.HasSuffix(key, ".ltx")
}
