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
	paced := "dir (paced " + session.DefaultDirUploadInterval.String() + ", the default)"
	if interval > 0 {
		paced = "dir (paced " + interval.String() + ")"
	}
	fmt.Printf("capture overhead: %d alternating rounds of %d single-row UPDATE commits per variant, after a warm-up round\n", rounds, commits)
	fmt.Println("commits/s: the median of the rounds' rates. cost of the medians: 1 − framectl/os of those two medians. " +
		"cost, median of the rounds': the median of each round's 1 − framectl/os (not the same figure)")
	fmt.Println("| synchronous | bucket | os commits/s | framectl commits/s | cost of the medians | cost, median of the rounds' | commits | PUTs |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	type variant struct {
		sync, bucket string
		unpaced      bool // session.Config.UploadInterval < 0
	}
	for _, variant := range []variant{
		{"NORMAL", "dir", false}, {"NORMAL", "dir", true}, {"NORMAL", "discard", false},
		{"FULL", "dir", false}, {"FULL", "dir", true}, {"FULL", "discard", false},
	} {
		sync := variant.sync
		name, every := variant.bucket, interval
		switch {
		case variant.unpaced:
			name, every = name+" unpaced", -1
		case variant.bucket == "dir":
			name = paced
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
		db, err := replicatedPaced(ctx, b, path(dir, "replicated"), session.Async, every)
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
		fmt.Printf("| %s | %s | %s | %s | %.1f%% | %.1f%% | %s | %s |\n", sync, name, thousands(mo), thousands(mf),
			100*(1-mf/mo), 100*(1-median(ratios)), thousands(float64(st.Commits)), thousands(float64(st.PUTs)))
	}
	return nil
}
