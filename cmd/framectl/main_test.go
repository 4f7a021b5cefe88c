package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket/buckettest"
)

func TestHelp(t *testing.T) {
	r := runCLI(t).want(t, exitUsage)
	contains(t, "framectl (no arguments)", r.stderr, "Commands:", "Exit codes:")
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		r = runCLI(t, args...).want(t, exitOK)
		contains(t, strings.Join(args, " "), r.stdout, "Exit codes:", "130")
		for _, c := range commands {
			contains(t, strings.Join(args, " "), r.stdout, "  "+c.name+" ")
		}
	}
	for _, c := range commands {
		r := runCLI(t, "help", c.name).want(t, exitOK)
		contains(t, "help "+c.name, r.stdout, "Usage: framectl "+c.name, "Examples:", "Flags:")
		r = runCLI(t, c.name, "-h").want(t, exitOK)
		contains(t, c.name+" -h", r.stdout, "Usage: framectl "+c.name)
	}
	r = runCLI(t, "restroe").want(t, exitUsage)
	contains(t, "stderr", r.stderr, `unknown command "restroe"`, "try: framectl help")
	runCLI(t, "help", "nothing").want(t, exitUsage)
}

// An interrupted command (SIGINT cancels the context) exits 130.
func TestInterrupted(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := framectlCtx(ctx, append([]string{"verify"}, f.actorFlags()...)...)
	if r.code != exitSignal {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitSignal, r.stderr)
	}
	r = framectlCtx(ctx, "demo", "--dir", t.TempDir(), "--commits", "10")
	if r.code != exitSignal {
		t.Fatalf("demo: exit %d, want %d\n%s", r.code, exitSignal, r.stderr)
	}
}

// Example runs framectl in-process, as the tests do: main only hands
// os.Args and the standard streams to run.
func Example() {
	code := run(context.Background(), []string{"help"}, os.Stdout, os.Stderr)
	if code != exitOK {
		panic(code)
	}
	// Output:
	// framectl: restore, verify and inspect SQLite databases replicated to a bucket
	//
	// Usage: framectl COMMAND [flags]    (framectl COMMAND -h for its flags and examples)
	//
	// Commands:
	//   demo     replicate a SQLite workload to a bucket, restore it and verify it
	//   restore  restore an actor to a file, or a namespace to a directory
	//   verify   check every object of an actor, a namespace or the bucket
	//   ls       list actors, sessions, snapshots and batches
	//   inspect  decode one object and print its header and frames
	//   compact  run snapshot compaction, retention and the tier pass once
	//
	// Start with: go run ./cmd/framectl demo
	//
	// Exit codes:
	//   0    success; verify: no damage found (warnings allowed)
	//   1    damage: an object in the bucket is corrupt, truncated, of a format
	//        this build does not know, missing although another object names
	//        it, or inconsistent with the others (a gap or a broken checksum
	//        chain in the log, an own.json or node lease that does not parse),
	//        found by verify or inspect, or the operation failed on it. An I/O
	//        error (3), an object that nothing names and that does not exist
	//        (4) and an interruption (130) are not damage
	//   2    usage: a flag or argument is wrong or missing
	//   3    io: the bucket is unreachable, or an I/O error (network, disk,
	//        permissions)
	//   4    not-found: no such bucket, actor, session, snapshot or object, or a restore
	//        target outside what the session holds (restore --nearest)
	//   130  interrupted: SIGINT or SIGTERM
	//
	// With --json, stdout holds exactly one JSON document whatever the outcome.
	// When the exit code is not 0 it has a member
	//   "error": {"code": 4, "kind": "not-found", "message": "..."}
	// whose kind is the word after the code above, beside the command's report
	// when it has one (verify's damage, restore --all's failed actors).
}

// A usage error says what is wrong and what to type, and exits 2.
func Example_usageError() {
	code := run(context.Background(), []string{"restore", "--bucket", "file:///var/lib/framectl/bucket", "--actor", "726f6f6d2d31"}, os.Stdout, os.Stdout)
	fmt.Println("exit code", code)
	// Output:
	// framectl restore: --namespace (or --namespace-id) is required
	//   try: framectl restore --bucket file:///path/to/bucket --namespace NS --actor HEX --out actor.db
	//   (framectl restore -h for help)
	// exit code 2
}
