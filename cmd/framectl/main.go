// Command framectl is the operator CLI of framectl: it restores, verifies,
// lists, inspects and compacts what replicated SQLite databases put in a
// bucket, and runs a demonstration of the whole cycle.
//
//	framectl demo     [--bucket URL | --dir DIR] [--commits N] [--json]
//	framectl restore  --bucket URL --namespace NS (--actor HEX | --all) --out PATH [--to-seq N | --at TIME] [--nearest]
//	framectl verify   --bucket URL [--namespace NS [--actor HEX]]
//	framectl ls       --bucket URL [--namespace NS [--actor HEX]] [--headers]
//	framectl inspect  [--bucket URL] KEY|FILE [--pages]
//	framectl compact  --bucket URL --namespace NS [--actor HEX] [--retention DURATION]
//	framectl help     [COMMAND]
//
// Bucket URLs are s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R&insecure=1
// (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN) or file:///DIR for a local directory bucket. A namespace
// is given by its unique key (--namespace, with --tenant, default empty) or
// by its path element (--namespace-id, the 22 characters ls prints).
//
// Every command takes --json and then prints exactly one JSON document on
// stdout, whatever the outcome: when the exit code is not 0 it has an
// "error" member {"code", "kind", "message"} (jsonerror.go). Progress goes
// to stderr: a bar on a terminal, plain lines otherwise, none with --json
// unless -v. Errors go to stderr, one line each, naming the object
// concerned.
//
// Exit codes (and the "kind" of the JSON error, the word after the code):
//
//	0    success; verify: no damage found (warnings allowed)
//	1    damage (frames.ErrDamage): an object in the bucket is corrupt,
//	     truncated, of a format this build does not know, missing although
//	     another object names it, or inconsistent with the others; found by
//	     verify or inspect, or the operation failed on it
//	2    usage: a flag or argument is wrong or missing
//	3    io: the bucket is unreachable, or an I/O error (network, disk, permissions)
//	4    not-found: no such bucket, actor, session, snapshot or object, or a restore
//	     target outside what the session holds
//	130  interrupted: SIGINT or SIGTERM
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: a function of its arguments and output
// streams returning the process exit code, so tests run it in-process.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"demo", "replicate a SQLite workload to a bucket, restore it and verify it", runDemo},
	{"restore", "restore an actor to a file, or a namespace to a directory", runRestore},
	{"verify", "check every object of an actor, a namespace or the bucket", runVerify},
	{"ls", "list actors, sessions, snapshots and batches", runLs},
	{"inspect", "decode one object and print its header and frames", runInspect},
	{"compact", "run snapshot compaction, retention and the tier pass once", runCompact},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal cancels the work, a second one kills.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCommands(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && name == "help" {
			if c, ok := lookup(args[1]); ok {
				return c.run(ctx, []string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "framectl help: unknown command %q\n  try: framectl help\n", args[1])
			return exitUsage
		}
		printCommands(stdout)
		return exitOK
	}
	c, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "framectl: unknown command %q\n  try: framectl help\n", name)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func printCommands(w io.Writer) {
	fmt.Fprint(w, "framectl: restore, verify and inspect SQLite databases replicated to a bucket\n\n")
	fmt.Fprint(w, "Usage: framectl COMMAND [flags]    (framectl COMMAND -h for its flags and examples)\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nStart with: go run ./cmd/framectl demo\n\n")
	fmt.Fprintln(w, exitCodesHelp)
}
