package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
)

// A side is one way of running the workload's database: without
// replication, with framectl, or with Litestream. Every side of a run
// starts from a copy of the same fixture and talks to the same S3 server
// through the same counting proxy, one side at a time.
type side interface {
	name() string
	// start replicates a copy of the fixture in dir, under the bucket
	// prefix prefix, and returns the connection the workload writes
	// through. It returns once the replica holds the starting state.
	start(ctx context.Context, env *versusEnv, dir, prefix string) (*sqlite3.Conn, error)
	// seq is the replicator's number of the last commit (framectl), or 0.
	seq() uint64
	// covers reports whether an object write holds commit c.
	covers(l landing, c commitMark) bool
	// drain waits until the bucket holds every commit made so far, the
	// last one being last.
	drain(ctx context.Context, env *versusEnv, last commitMark) error
	// note is what the side adds to its row (framectl on a directory
	// bucket: its PUTs, which the proxy does not see).
	note(seconds float64) string
	// compactions is the number of compaction passes the side's
	// replicator has run so far, or -1 for a side that does not compact in
	// this process (none, Litestream).
	compactions() int64
	// cpu is the CPU time of the side's own process so far (Litestream),
	// or 0 when it runs in this one.
	cpu() time.Duration
	// stored is where the replica's objects are, for footprints: a bucket
	// and a key prefix in it.
	stored(env *versusEnv, prefix string) (bucket.Bucket, string)
	// counted reports whether the side's requests go through the proxy
	// (not framectl's bucket=dir variants).
	counted() bool
	// stop ends replication and closes c.
	stop(ctx context.Context, c *sqlite3.Conn) error
}

// none is the database without replication: the baseline of commit rates.
type none struct{}

func (none) name() string { return "no replication" }

func (none) start(ctx context.Context, env *versusEnv, dir, prefix string) (*sqlite3.Conn, error) {
	file := filepath.Join(dir, "db.sqlite")
	if err := copyFile(env.fixture, file); err != nil {
		return nil, err
	}
	return plain(file)
}

func (none) seq() uint64                                         { return 0 }
func (none) covers(landing, commitMark) bool                     { return false }
func (none) drain(context.Context, *versusEnv, commitMark) error { return nil }
func (none) note(float64) string                                 { return "" }
func (none) compactions() int64                                  { return -1 }
func (none) cpu() time.Duration                                  { return 0 }
func (none) counted() bool                                       { return true }
func (none) stop(ctx context.Context, c *sqlite3.Conn) error     { return c.Close() }

func (none) stored(env *versusEnv, prefix string) (bucket.Bucket, string) {
	return env.direct, prefix + "/"
}
