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
