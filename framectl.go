package framectl

import (
	"context"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/session"
)

// DB is one replicated SQLite database: a local file whose every commit,
// made through connections from Conn or the DSN, is shipped to the bucket.
// Its replication is the embedded session (Durable, Stats, Fence, Close,
// Epoch, Path).
type DB struct {
	*session.Session
}

// Open opens the database of one actor for one session and starts
// replicating it: session.Open with the capture's side of the file (it
// claims the actor when cfg.Node is set, brings the local copy up to date,
// uploads the session's first snapshot, then puts the file under capture).
// Every connection the DB gives replicates its commits.
func Open(ctx context.Context, cfg session.Config) (*DB, error) {
	s, err := session.Open(ctx, cfg, local{})
	if err != nil {
		return nil, err
	}
	return &DB{s}, nil
}

// Reopen ends this session and opens the database again on the same
// directory with the same configuration, claiming it for node when node is
// not nil: session.Session.Reopen says when and why.
func (db *DB) Reopen(ctx context.Context, node *fence.Node) (*DB, error) {
	s, err := db.Session.Reopen(ctx, node, local{})
	if err != nil {
		return nil, err
	}
	return &DB{s}, nil
}

// DSN returns a data source name for database/sql with go-sqlite3's driver
// (import _ "github.com/ncruces/go-sqlite3/driver"; sql.Open("sqlite3",
// db.DSN())), with a 10 s busy timeout. Every connection it opens is
// replicated.
func (db *DB) DSN() string { return capture.DSN(db.Path()) }

// Conn opens a new connection to the database, with a 10 s busy timeout;
// params are extra URI parameters ("psow=0"). Close it before Close.
func (db *DB) Conn(params ...string) (*sqlite3.Conn, error) {
	return capture.Conn(db.Path(), params...)
}
