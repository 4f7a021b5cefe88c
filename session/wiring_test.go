package session

import (
	"context"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/fence"
)

// The tests of this package open sessions on real SQLite files through the
// real capture, as framectl.Open does; they cannot import package
// framectl, which imports this one, so this file is that wiring for them
// (without the refusal reasons framectl gives: its tests, and this
// package's external ones, read those back).

// testLocal is the capture's side of a session's file.
type testLocal struct{}

func (testLocal) Prepare(ctx context.Context, path string, pageSize int) error {
	return capture.Prepare(ctx, path, pageSize)
}

func (testLocal) PageSize(path string) (uint32, error) { return capture.PageSize(path) }

func (testLocal) Attach(path string, a Attachment) (func(), error) {
	return capture.Attach(path, capture.Options{Sink: a.Capture, Pages: a.Pages, PageSize: a.PageSize})
}

// DB is a session with the SQLite side the tests use, as framectl.DB.
type DB struct{ *Session }

// openDB is framectl.Open.
func openDB(ctx context.Context, cfg Config) (*DB, error) {
	s, err := Open(ctx, cfg, testLocal{})
	if err != nil {
		return nil, err
	}
	return &DB{s}, nil
}

// Reopen is framectl.DB.Reopen.
func (db *DB) Reopen(ctx context.Context, node *fence.Node) (*DB, error) {
	s, err := db.Session.Reopen(ctx, node, testLocal{})
	if err != nil {
		return nil, err
	}
	return &DB{s}, nil
}

// DSN and Conn are framectl.DB's.
func (db *DB) DSN() string {
	return capture.URI(db.Path(), capture.Name, "_pragma=busy_timeout(10000)")
}

func (db *DB) Conn(params ...string) (*sqlite3.Conn, error) {
	c, err := sqlite3.Open(capture.URI(db.Path(), capture.Name, params...))
	if err != nil {
		return nil, err
	}
	if err := c.BusyTimeout(10e9); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
