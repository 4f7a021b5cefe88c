package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/session"
)

// framectlSide is framectl in async mode (the workload never calls
// Durable), with one variant's settings.
type framectlSide struct {
	label     string
	interval  time.Duration // session.Config.UploadInterval
	rule      compact.Rule  // session.Config.Compaction
	noCompact bool
	retention time.Duration // session.Config.Retention
	kept      int64         // session.Config.KeptBytes
	dirBucket bool          // a directory bucket under the run's work directory

	db   *framectl.DB
	dir  bucket.Bucket // when dirBucket
	from session.Stats // at the start of the workload
}

func (*framectlSide) cpu() time.Duration { return 0 }
func (s *framectlSide) counted() bool    { return !s.dirBucket }

func (s *framectlSide) stored(env *versusEnv, prefix string) (bucket.Bucket, string) {
	if s.dirBucket {
		return s.dir, ""
	}
	return env.direct, prefix + "/"
}

func (s *framectlSide) name() string { return "framectl " + s.label }

func (s *framectlSide) start(ctx context.Context, env *versusEnv, dir, prefix string) (*sqlite3.Conn, error) {
	if err := copyFile(env.fixture, filepath.Join(dir, "db.sqlite")); err != nil {
		return nil, err
	}
	url := fmt.Sprintf("s3://%s/%s?endpoint=%s&insecure=1", env.bucketName, prefix, env.proxy.Addr())
	if s.dirBucket {
		url = "file://" + filepath.Join(env.work.root, "dirbucket-"+prefix)
	}
	b, err := bucket.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	s.dir = b
	id := make([]byte, 8)
	rand.Read(id)
	s.db, err = framectl.Open(ctx, session.Config{Bucket: b, Namespace: "versus", Actor: id, Epoch: 1, Dir: dir,
		UploadInterval: s.interval, Compaction: s.rule, DisableCompaction: s.noCompact,
		Retention: s.retention, KeptBytes: s.kept})
	if err != nil {
		return nil, err
	}
	c, err := s.db.Conn()
	if err != nil {
		s.db.Close(ctx)
		return nil, err
	}
	env.quiet()
	s.from = s.db.Stats()
	return c, nil
}

func (s *framectlSide) seq() uint64 { return uint64(s.db.Stats().Captured) }

// covers: a batch's key names the last sequence number it holds.
func (s *framectlSide) covers(l landing, c commitMark) bool {
	i := strings.Index(l.key, "do/")
	if i < 0 {
		return false
	}
	k, err := frames.ParseKey(l.key[i:])
	return err == nil && k.Kind == frames.KeyLog && uint64(k.Seq) >= c.seq
}

// drain waits for Durable, then for the proxy to have recorded the write
// that holds the last commit: it records a write once its response is
// relayed, a moment after the client may have seen it.
func (s *framectlSide) drain(ctx context.Context, env *versusEnv, last commitMark) error {
	if err := s.db.Durable(ctx); err != nil || s.dirBucket {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, l := range env.proxy.Landed(0) {
			if s.covers(l, last) {
				return nil
			}
		}
	}
	return errors.New("Durable returned but the proxy saw no write holding the last commit")
}

func (s *framectlSide) note(seconds float64) string {
	if !s.dirBucket {
		return ""
	}
	st := s.db.Stats()
	return fmt.Sprintf("%.1f PUTs/1000 commits (session.Stats)", 1000*float64(st.PUTs-s.from.PUTs)/float64(max(st.Commits-s.from.Commits, 1)))
}

func (s *framectlSide) compactions() int64 { return int64(s.db.Stats().Compactions) }

func (s *framectlSide) stop(ctx context.Context, c *sqlite3.Conn) error {
	return errors.Join(c.Close(), s.db.Close(ctx))
}
