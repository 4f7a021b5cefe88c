package session

import (
	"context"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/fence"
)

// The tests of this package open sessions on real SQLite files through the
// real capture, as framectl.Open does; they cannot import package
// framectl, which imports this one, so this file is that wiring for them:
// capture.Local without the refusal reasons framectl gives (its tests read
// those back).

// DB is a session with the SQLite side the tests use, as framectl.DB.
type DB struct{ *Session }

// openDB is framectl.Open.
func openDB(ctx context.Context, cfg Config) (*DB, error) {
	s, err := Open(ctx, cfg, capture.Local{})
	if err != nil {
		return nil, err
	}
	return &DB{s}, nil
}

// Reopen is framectl.DB.Reopen.
func (db *DB) Reopen(ctx context.Context, node *fence.Node) (*DB, error) {
	s, err := db.Session.Reopen(ctx, node, capture.Local{})
	if err != nil {
		return nil, err
	}
	return &DB{s}, nil
}

// DSN and Conn are framectl.DB's.
func (db *DB) DSN() string { return capture.DSN(db.Path()) }

func (db *DB) Conn(params ...string) (*sqlite3.Conn, error) {
	return capture.Conn(db.Path(), params...)
}
