package main

import (
	"context"
	"fmt"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/session"
)

// overhead: commits/s of single-row UPDATE transactions, plain os VFS vs
// framectl with async replication, in alternating rounds: to a directory
// bucket (the embedded default) with its default upload pacing and with
// none, and to a bucket that discards everything (what the process itself
// spends, without the bucket's I/O).
func overhead(ctx context.Context, rounds, commits int, interval time.Duration) error {
	fmt.Printf("capture overhead: %d alternating rounds of %d single-row UPDATE commits per variant\n", rounds, commits)
	fmt.Printf("%-8s %-13s %14s %14s %10s %10s\n", "sync", "bucket", "os commits/s", "framectl c/s", "cost", "round med")
	type variant struct {
		sync, bucket string
		unpaced      bool // session.Config.UploadInterval < 0
	}
	for _, variant := range []variant{
		{"NORMAL", "dir", false}, {"NORMAL", "dir", true}, {"NORMAL", "discard", false},
		{"FULL", "dir", false}, {"FULL", "dir", true}, {"FULL", "discard", false},
	} {
		sync := variant.sync
		name := variant.bucket
		paced := interval
		if variant.unpaced {
			name, paced = name+" unpaced", -1
		}
		dir, cleanup, err := workDir()
		if err != nil {
			return err
		}
		defer cleanup()
		var b bucket.Bucket = discard{}
		if variant.bucket == "dir" {
			var bdir string
			if b, bdir, err = tempBucket(); err != nil {
				return err
			}
			defer removeAll(bdir)
		}
		pc, err := plain(path(dir, "plain.db"))
		if err != nil {
			return err
		}
		defer pc.Close()
		db, err := replicatedPaced(ctx, b, path(dir, "replicated"), session.Async, paced)
		if err != nil {
			return err
		}
		defer db.Close(ctx)
		rc, err := db.Conn()
		if err != nil {
			return err
		}
		defer rc.Close()
		for _, c := range []interface{ Exec(string) error }{pc, rc} {
			if err := c.Exec("PRAGMA synchronous=" + sync + "; CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t SELECT value, 0 FROM generate_series(1, 1000)"); err != nil {
				return err
			}
		}
		var osRates, fcRates, ratios []float64
		for r := range rounds + 1 {
			o, err := updateLoop(pc, 1+r%1000, commits)
			if err != nil {
				return err
			}
			f, err := updateLoop(rc, 1+r%1000, commits)
			if err != nil {
				return err
			}
			if r == 0 {
				continue // warm-up
			}
			osRates, fcRates, ratios = append(osRates, o), append(fcRates, f), append(ratios, f/o)
		}
		if err := db.Durable(ctx); err != nil {
			return err
		}
		mo, mf := median(osRates), median(fcRates)
		st := db.Stats()
		fmt.Printf("%-8s %-13s %14.0f %14.0f %9.1f%% %9.1f%%   (%d commits, %d PUTs)\n", sync, name, mo, mf,
			100*(1-mf/mo), 100*(1-median(ratios)), st.Commits, st.PUTs)
	}
	fmt.Println("cost = 1 - framectl/os of the median rates; round med = median of the per-round ratios")
	return nil
}
