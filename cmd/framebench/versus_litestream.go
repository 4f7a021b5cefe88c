package main

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket"
)

// litestreamSide is litestream replicate beside the database, with its
// default intervals or both set to interval.
type litestreamSide struct {
	interval time.Duration
	dir      string
	proc     *litestreamProcess
}

func (s *litestreamSide) seq() uint64         { return 0 }
func (s *litestreamSide) counted() bool       { return true }
func (s *litestreamSide) note(float64) string { return "" }
func (s *litestreamSide) compactions() int64  { return -1 }
func (s *litestreamSide) cfgFile() string     { return filepath.Join(s.dir, "litestream.yml") }
func (s *litestreamSide) dbFile() string      { return filepath.Join(s.dir, "db.sqlite") }
func (s *litestreamSide) logFile() string     { return filepath.Join(s.dir, "litestream.log") }

func (s *litestreamSide) cpu() time.Duration {
	d, _ := procCPU(s.proc.cmd.Process.Pid)
	return d
}

func (s *litestreamSide) stored(env *versusEnv, prefix string) (bucket.Bucket, string) {
	return env.direct, prefix + "/"
}

func (s *litestreamSide) config(env *versusEnv, prefix string) litestreamConfig {
	return litestreamConfig{db: s.dbFile(), endpoint: env.proxy.Addr(), bucket: env.bucketName, path: prefix, interval: s.interval}
}

func (s *litestreamSide) name() string {
	if s.interval == 0 {
		return "litestream default (1 s)"
	}
	return "litestream " + s.interval.String()
}

func (s *litestreamSide) start(ctx context.Context, env *versusEnv, dir, prefix string) (*sqlite3.Conn, error) {
	s.dir = dir
	if err := copyFile(env.fixture, s.dbFile()); err != nil {
		return nil, err
	}
	if err := s.config(env, prefix).write(s.cfgFile()); err != nil {
		return nil, err
	}
	from := env.proxy.NumLanded()
	var err error
	if s.proc, err = startLitestream(env.litestream, s.cfgFile(), s.logFile()); err != nil {
		return nil, err
	}
	c, err := plain(s.dbFile())
	if err != nil {
		s.proc.stop()
		return nil, err
	}
	// Ready once its first L0 file (the whole database) is in the bucket.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := s.proc.exited(); err != nil {
			c.Close()
			return nil, err
		}
		done := false
		for _, l := range env.proxy.Landed(from) {
			done = done || litestreamL0(l.key)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			c.Close()
			s.proc.stop()
			return nil, errors.New("litestream uploaded no L0 file within 60 s of starting")
		}
	}
	env.quiet()
	return c, nil
}

// covers: an L0 file holds every commit made before the time in its
// header (ltxTimestamp). The header's time is in milliseconds, so a commit
// in the same millisecond as the WAL read counts as held.
func (s *litestreamSide) covers(l landing, c commitMark) bool {
	if !litestreamL0(l.key) {
		return false
	}
	ts, ok := ltxTimestamp(l.head)
	return ok && c.at.UnixMilli() <= ts
}

func (s *litestreamSide) drain(ctx context.Context, env *versusEnv, last commitMark) error {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, l := range env.proxy.Landed(0) {
			if l.at.After(last.at) && s.covers(l, last) {
				return nil
			}
		}
		if err := s.proc.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("litestream did not upload the last commit within 60 s")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (s *litestreamSide) stop(ctx context.Context, c *sqlite3.Conn) error {
	return errors.Join(c.Close(), s.proc.stop())
}
