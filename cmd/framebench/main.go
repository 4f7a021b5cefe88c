// Command framebench is the side-by-side benchmark harness: it measures
// what replication costs a SQLite application, running the variants it
// compares in alternating rounds of one process so that a noisy machine
// affects them alike, and prints the numbers recorded in BENCHMARKS.md.
//
//	framebench overhead   [-rounds 7] [-commits 2000] [-upload-interval D]
//	framebench durable    -bucket URL [-seconds 5]
//	framebench efficiency [-bucket URL] [-upload-interval D]
//	framebench restore    [-bucket URL] [-size 1GiB]
//	framebench versus     [-bucket URL] [-phases rate,cost,restore] [-framectl VARIANTS] [-litestream default,100ms] [-size 1GiB]
//	framebench table      [-units U,...] [-median] [FILE...]   < go test -bench output
//
// overhead compares commits/s of single-row UPDATE transactions through the
// plain "os" VFS and through framectl with async replication to a directory
// bucket, at synchronous=NORMAL and FULL. durable measures commits/s when
// every commit waits for Durable, with 1 and 16 writers, and Sync mode for
// contrast (run it against versitygw: scripts/with-s3.sh go run
// ./cmd/framebench durable -bucket "$FRAMECTL_TEST_S3"). efficiency counts
// PUTs per 1,000 commits and bytes uploaded per commit. versus runs
// framectl and Litestream (installed with go install into
// $HOME/.cache/litestream-v0.5.18 when missing) side by side on one S3
// server through a counting proxy: commit rates against no replication,
// requests, bytes and lag per 1,000 commits, and restore throughput
// (versus.go; scripts/with-s3.sh starts the server). table prints the
// output of `go test -bench` as a markdown table, one row per benchmark and
// one column per unit (table.go): the shape of BENCHMARKS.md's tables of go
// benchmarks.
//
// Every subcommand prints its results as the markdown tables of
// BENCHMARKS.md, headers included, so that each table there is what the
// command beside it prints.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "overhead":
		rounds := fs.Int("rounds", 7, "alternating rounds per variant")
		commits := fs.Int("commits", 2000, "commits per round")
		profile := fs.String("cpuprofile", "", "write a CPU profile to this file")
		interval := fs.Duration("upload-interval", 0, "the paced variants' session.Config.UploadInterval (default: the session's default for the bucket)")
		fs.Parse(os.Args[2:])
		if *profile != "" {
			f, perr := os.Create(*profile)
			if perr != nil {
				fmt.Fprintln(os.Stderr, "framebench:", perr)
				os.Exit(1)
			}
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
		err = overhead(ctx, *rounds, *commits, *interval)
	case "durable":
		url := fs.String("bucket", os.Getenv("FRAMECTL_TEST_S3"), "bucket URL (default $FRAMECTL_TEST_S3)")
		seconds := fs.Float64("seconds", 5, "seconds per variant")
		fs.Parse(os.Args[2:])
		err = durable(ctx, *url, *seconds)
	case "efficiency":
		url := fs.String("bucket", "", "bucket URL (default: a temporary directory bucket)")
		interval := fs.Duration("upload-interval", 0, "session.Config.UploadInterval (default: the session's default for the bucket; negative: unpaced)")
		fs.Parse(os.Args[2:])
		err = efficiency(ctx, *url, *interval)
	case "restore":
		err = restoreCmd(ctx, fs, os.Args[2:])
	case "versus":
		err = versusCmd(ctx, fs, os.Args[2:])
	case "table":
		err = tableCmd(fs, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "framebench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: framebench overhead|durable|efficiency|restore|versus|table [flags]   (framebench CMD -h for flags)")
	os.Exit(2)
}
