package main

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3" for database/sql

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/host"
)

// actorDB is what this runtime keeps per open actor (host.Actor.Value): a
// database/sql pool on its replicated database.
//
// Writes are serialized by wmu, and only the statement is: the wait for the
// bucket (Durable) happens outside it, so the writes of concurrent requests
// share uploads (group commit) instead of queueing behind each other's
// round trips. Reads use the pool concurrently (WAL readers do not block
// the writer).
type actorDB struct {
	db    *framectl.DB
	sql   *sql.DB
	wmu   sync.Mutex
	actor *host.Actor // for its alarm
	// alarms: this node runs the alarms of the actor's namespace
	// (-alarm-namespaces); setting one elsewhere is refused, since
	// nothing would run it.
	alarms bool
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

// actorHooks are this runtime's part of an actor's lifecycle: a pool and
// the schema once the host opened the actor's database, the pool closed
// before the host closes it. alarmNamespaces are those whose alarms this
// node runs.
func actorHooks(alarmNamespaces map[string]bool) host.Hooks {
	return host.Hooks{
		Opened: func(ctx context.Context, a *host.Actor) error {
			// synchronous=NORMAL: the bucket, not the local file, is what
			// makes a write durable; a local copy that lost its last
			// commits in a power cut fails the session's checksum check and is
			// restored.
			pool, err := sql.Open("sqlite3", a.DB().DSN()+"&_pragma=synchronous(NORMAL)")
			if err != nil {
				return fmt.Errorf("opening a pool: %w", err)
			}
			pool.SetMaxOpenConns(maxPoolConns)
			pool.SetMaxIdleConns(maxPoolConns)
			if _, err := pool.ExecContext(ctx, schema); err != nil {
				pool.Close()
				return fmt.Errorf("schema: %w", err)
			}
			a.SetValue(&actorDB{db: a.DB(), sql: pool, actor: a, alarms: alarmNamespaces[a.Namespace()]})
			return nil
		},
		Closing: func(_ context.Context, a *host.Actor) {
			a.Value().(*actorDB).sql.Close()
		},
	}
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
func (d *actorDB) stopped() error { return d.db.Stats().Stopped }
