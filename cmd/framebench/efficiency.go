package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/framectl/framectl/session"
)

// efficiency: PUTs per 1,000 commits and bytes uploaded per commit for
// (a) updates of one row and (b) random inserts into a 100 MB table, with
// the bucket's upload pacing (interval: session.Config.UploadInterval, 0 for
// the session's default for the bucket, negative for none).
func efficiency(ctx context.Context, url string, interval time.Duration) error {
	b, cleanup, err := openBucket(ctx, url)
	if err != nil {
		return err
	}
	defer cleanup()
	kind, def := "S3", session.DefaultS3UploadInterval
	if url == "" || strings.HasPrefix(url, "file:") {
		kind, def = "directory", session.DefaultDirUploadInterval
	}
	where := fmt.Sprintf("%s, paced %v", kind, interval)
	switch {
	case interval < 0:
		where = kind + ", unpaced"
	case interval == 0:
		where = fmt.Sprintf("%s, paced %v (the default)", kind, def)
	}
	fmt.Printf("upload efficiency against %s (async; Durable only at the end unless noted)\n", b)
	fmt.Println("| workload | bucket | PUTs per 1,000 commits | bytes uploaded per commit | pages per commit |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, n int64, st session.Stats) {
		fmt.Printf("| %s | %s | %s | %s | %.2f |\n", name, where, thousands(1000*float64(st.PUTs)/float64(n)),
			thousands(float64(st.BytesUploaded)/float64(n)), float64(st.BytesMerged)/float64(n)/4096)
	}
	for _, each := range []bool{false, true} {
		st, err := measure(ctx, b, interval, 0, 1000, each, func(c execer, i int, rng *rand.Rand) error {
			return c.Exec("UPDATE t SET n = n + 1 WHERE id = 1")
		})
		if err != nil {
			return err
		}
		name := "(a) 1,000 updates of one row"
		if each {
			name += ", Durable after each"
		}
		row(name, 1000, st)
	}
	for _, each := range []bool{false, true} {
		st, err := measure(ctx, b, interval, 100<<20, 1000, each, func(c execer, i int, rng *rand.Rand) error {
			return c.Exec(fmt.Sprintf("INSERT INTO big(k, v) VALUES(%d, randomblob(100))", rng.Int64()))
		})
		if err != nil {
			return err
		}
		name := "(b) 1,000 random inserts into a 100 MB table"
		if each {
			name += ", Durable after each"
		}
		row(name, 1000, st)
	}
	return nil
}

type execer interface{ Exec(string) error }

// measure builds a database (with a table big of about tableBytes), opened
// with upload pacing interval, then runs n commits of op and returns the
// replication counters they caused.
func measure(ctx context.Context, b interface{ String() string }, interval time.Duration, tableBytes int64, n int, durableEach bool, op func(execer, int, *rand.Rand) error) (session.Stats, error) {
	dir, cleanup, err := workDir()
	if err != nil {
		return session.Stats{}, err
	}
	defer cleanup()
	bk, _, err := openBucket(ctx, b.String())
	if err != nil {
		return session.Stats{}, err
	}
	db, err := replicatedPaced(ctx, bk, dir, session.Async, interval)
	if err != nil {
		return session.Stats{}, err
	}
	defer db.Close(ctx)
	c, err := db.Conn()
	if err != nil {
		return session.Stats{}, err
	}
	defer c.Close()
	setup := "PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, n INT); INSERT INTO t VALUES(1, 0);" +
		"CREATE TABLE big(k INTEGER PRIMARY KEY, v BLOB)"
	if err := c.Exec(setup); err != nil {
		return session.Stats{}, err
	}
	// About 100 bytes of payload per row, in 10 MB transactions.
	for done := int64(0); done < tableBytes; done += 10 << 20 {
		if err := c.Exec(fmt.Sprintf("INSERT INTO big(k, v) SELECT abs(random()), randomblob(100) FROM generate_series(1, %d)", (10<<20)/120)); err != nil {
			return session.Stats{}, err
		}
	}
	if err := db.Durable(ctx); err != nil {
		return session.Stats{}, err
	}
	before := db.Stats()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		if err := op(c, i, rng); err != nil {
			return session.Stats{}, err
		}
		if durableEach {
			if err := db.Durable(ctx); err != nil {
				return session.Stats{}, err
			}
		}
	}
	if err := db.Durable(ctx); err != nil {
		return session.Stats{}, err
	}
	st := db.Stats()
	st.PUTs -= before.PUTs
	st.Batches -= before.Batches
	st.BytesUploaded -= before.BytesUploaded
	st.BytesMerged -= before.BytesMerged
	st.BytesRaw -= before.BytesRaw
	return st, nil
}

func removeAll(dir string) { os.RemoveAll(dir) }
