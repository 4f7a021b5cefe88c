package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3" for database/sql

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/vfs"
)

// actorDB is one open actor: its replicated database for one ownership
// epoch, and a database/sql pool on it.
//
// Writes are serialized by wmu, and only the statement is: the wait for the
// bucket (Durable) happens outside it, so the writes of concurrent requests
// share uploads (group commit) instead of queueing behind each other's
// round trips. Reads use the pool concurrently (WAL readers do not block
// the writer).
type actorDB struct {
	actor frames.Actor
	epoch uint64 // the claim's epoch, sent as X-Actor-Epoch
	vfs   *vfs.DB
	sql   *sql.DB
	wmu   sync.Mutex
}

// schema is created on first open; IF NOT EXISTS makes it a no-op (and no
// commit) afterwards.
const schema = `
CREATE TABLE IF NOT EXISTS notes(
	id   INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: ids order the notes
	body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counter(
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	value INTEGER NOT NULL
);`

// maxPoolConns bounds an actor's connections: one writer at a time, the
// rest for reads.
const maxPoolConns = 4

// openActor opens the actor's database for this node: vfs.Open claims it
// (a holder elsewhere is a *fence.HeldError, returned as is for the caller to
// forward), restores it if needed, and starts the session.
func openActor(ctx context.Context, h *host, key actorKey) (*actorDB, error) {
	a := frames.Actor{Namespace: frames.NamespaceID("", key.ns), Actor: frames.ActorKey([]byte(key.id))}
	db, err := vfs.Open(ctx, vfs.Config{
		Bucket:    h.b,
		Namespace: key.ns,
		Actor:     []byte(key.id),
		Node:      h.node,
		Dir:       filepath.Join(h.cfg.dataDir, key.ns, a.Actor),
		// vfs compacts the actor in the background: the size rule after
		// uploads, and the tier pass as each session starts.
		DisableCompaction: !h.cfg.compact,
		Logger:            h.log,
	})
	if err != nil {
		return nil, fmt.Errorf("opening actor %s/%s: %w", key.ns, key.id, err) // vfs.Open gave its claim back
	}
	// synchronous=NORMAL: the bucket, not the local file, is what makes a
	// write durable; a local copy that lost its last commits in a power
	// cut fails vfs's checksum check and is restored.
	pool, err := sql.Open("sqlite3", db.DSN()+"&_pragma=synchronous(NORMAL)")
	if err == nil {
		pool.SetMaxOpenConns(maxPoolConns)
		pool.SetMaxIdleConns(maxPoolConns)
		_, err = pool.ExecContext(ctx, schema)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		if cerr := db.Close(context.WithoutCancel(ctx)); cerr != nil {
			h.log.Warn("closing after a failed open", logNamespace, key.ns, logActor, key.id, logErr, cerr)
		}
		return nil, fmt.Errorf("opening actor %s/%s: schema: %w", key.ns, key.id, err)
	}
	d := &actorDB{actor: a, epoch: db.Epoch(), vfs: db, sql: pool}
	h.log.Info("actor open", logNamespace, key.ns, logActor, key.id, logEpoch, db.Epoch())
	return d, nil
}

// note is one row of the notes table.
type note struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

func (d *actorDB) addNote(ctx context.Context, body string) (int64, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	var id int64
	if err := d.sql.QueryRowContext(ctx, `INSERT INTO notes(body) VALUES(?) RETURNING id`, body).Scan(&id); err != nil {
		return 0, fmt.Errorf("adding a note: %w", err)
	}
	return id, nil
}

func (d *actorDB) notes(ctx context.Context) ([]note, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT id, body FROM notes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading notes: %w", err)
	}
	defer rows.Close()
	out := []note{}
	for rows.Next() {
		var n note
		if err := rows.Scan(&n.ID, &n.Body); err != nil {
			return nil, fmt.Errorf("reading notes: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading notes: %w", err)
	}
	return out, nil
}

func (d *actorDB) increment(ctx context.Context) (int64, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	var v int64
	err := d.sql.QueryRowContext(ctx, `INSERT INTO counter(id, value) VALUES(1, 1)
		ON CONFLICT(id) DO UPDATE SET value = value + 1 RETURNING value`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("incrementing the counter: %w", err)
	}
	return v, nil
}

// stopped returns why the database stopped replicating (fenced, a write it
// cannot account for), nil while it runs.
func (d *actorDB) stopped() error { return d.vfs.Stats().Stopped }

// close closes the pool, then the database: a final flush, then the
// release of own.json (vfs.DB.Close), so the next claim anywhere gets the
// next epoch without waiting for this node's lease. A database that
// stopped (fenced) is not released: its own.json is not ours any more.
func (d *actorDB) close(ctx context.Context) error {
	err := d.sql.Close()
	if cerr := d.vfs.Close(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("closing actor %s: %w", d.actor.Prefix(), err)
	}
	return nil
}
