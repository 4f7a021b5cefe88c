package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/ncruces/go-sqlite3"
)

// The hot small database of framebench versus: a table of rows rewritten
// at random, one row per commit. Each commit changes one leaf page, with
// random bytes that do not compress, so a replicator's bytes per commit
// are about what it uploads per page changed and how well it merges pages
// rewritten before it uploads them. 10,000 rows of 100 bytes make a
// database of about 1.15 MB (283 pages of 4 KiB).
type hotWorkload struct {
	rows, rowBytes int
	seed           uint64
}

// build writes the database to file with the plain os VFS, in WAL mode,
// checkpointed: every variant of a run starts from a copy of it.
func (w hotWorkload) build(file string) (int64, error) {
	c, err := plain(file)
	if err != nil {
		return 0, err
	}
	err = c.Exec(fmt.Sprintf("PRAGMA page_size=4096; CREATE TABLE t(id INTEGER PRIMARY KEY, n INT, v BLOB);"+
		"INSERT INTO t SELECT value, 0, randomblob(%d) FROM generate_series(1, %d); PRAGMA wal_checkpoint(TRUNCATE)", w.rowBytes, w.rows))
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("building %s: %w", file, err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// writer runs the workload's commits on one connection.
type writer struct {
	s   *sqlite3.Stmt
	rng *rand.Rand
	w   hotWorkload
}

// newWriter prepares the workload's statement on c; round seeds the rows
// chosen, so that every variant of a round rewrites the same rows in the
// same order.
func (w hotWorkload) writer(c *sqlite3.Conn, round int) (*writer, error) {
	s, _, err := c.Prepare("UPDATE t SET n = n + 1, v = randomblob(?) WHERE id = ?")
	if err != nil {
		return nil, err
	}
	return &writer{s: s, rng: rand.New(rand.NewPCG(w.seed, uint64(round))), w: w}, nil
}

func (wr *writer) commit() error {
	wr.s.BindInt(1, wr.w.rowBytes)
	wr.s.BindInt(2, 1+wr.rng.IntN(wr.w.rows))
	return wr.s.Exec()
}

func (wr *writer) Close() error { return wr.s.Close() }

// flatOut runs commits as fast as one connection can for d and returns
// how many.
func (wr *writer) flatOut(d time.Duration) (int, time.Duration, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		if err := wr.commit(); err != nil {
			return n, 0, err
		}
		n++
	}
	return n, time.Since(start), nil
}

// commitMark is one commit of a paced run: when it returned, and the
// sequence number the replicator gave it (framectl; 0 otherwise).
type commitMark struct {
	at  time.Time
	seq uint64
}

// paced runs rate commits per second for d (a commit per tick; a tick
// missed while a commit ran is skipped, not made up), or with rate 0 as
// many as one connection can, calling seq after each for the
// replicator's number of it.
func (wr *writer) paced(rate float64, d time.Duration, seq func() uint64) ([]commitMark, error) {
	var marks []commitMark
	end := time.Now().Add(d)
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		tick = t.C
		marks = make([]commitMark, 0, int(rate*d.Seconds())+1)
	}
	for {
		now := time.Now()
		if tick != nil {
			now = <-tick
		}
		if now.After(end) {
			return marks, nil
		}
		if err := wr.commit(); err != nil {
			return marks, err
		}
		marks = append(marks, commitMark{at: time.Now(), seq: seq()})
	}
}

// copyFile copies the fixture to dst (creating its directory).
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
