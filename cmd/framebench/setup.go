package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/session"
)

// replicated opens a fresh replicated database in dir on b.
func replicated(ctx context.Context, b bucket.Bucket, dir string, mode session.Mode) (*framectl.DB, error) {
	return replicatedPaced(ctx, b, dir, mode, 0)
}

// replicatedPaced is replicated with session.Config.UploadInterval set.
func replicatedPaced(ctx context.Context, b bucket.Bucket, dir string, mode session.Mode, interval time.Duration) (*framectl.DB, error) {
	id := make([]byte, 8)
	rand.Read(id)
	return framectl.Open(ctx, session.Config{Bucket: b, Namespace: "bench", Actor: id, Epoch: 1, Dir: dir, Mode: mode, UploadInterval: interval})
}

// plain opens a database through the os VFS in WAL mode.
func plain(path string) (*sqlite3.Conn, error) {
	c, err := sqlite3.Open("file:" + path + "?vfs=os")
	if err != nil {
		return nil, err
	}
	if err := c.Exec("PRAGMA journal_mode=WAL"); err != nil {
		c.Close()
		return nil, err
	}
	return c, c.BusyTimeout(10e9)
}

func tempBucket() (bucket.Bucket, string, error) {
	dir, err := os.MkdirTemp("", "framebench-bucket-")
	if err != nil {
		return nil, "", err
	}
	b, err := bucket.Open(context.Background(), "file://"+dir)
	return b, dir, err
}

func openBucket(ctx context.Context, url string) (bucket.Bucket, func(), error) {
	if url == "" {
		b, dir, err := tempBucket()
		return b, func() { os.RemoveAll(dir) }, err
	}
	b, err := bucket.Open(ctx, url)
	return b, func() {}, err
}

func workDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "framebench-")
	return dir, func() { os.RemoveAll(dir) }, err
}

// updateLoop runs n single-row UPDATE transactions and returns commits/s.
func updateLoop(c *sqlite3.Conn, id, n int) (float64, error) {
	s, _, err := c.Prepare("UPDATE t SET n = n + 1 WHERE id = ?")
	if err != nil {
		return 0, err
	}
	defer s.Close()
	start := time.Now()
	for range n {
		s.BindInt(1, id)
		if err := s.Exec(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func path(dir, name string) string { return filepath.Join(dir, name) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
