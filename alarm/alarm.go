package alarm

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"
)

// Errors of the alarm operations. Their texts begin "alarm:" (they began
// "host:" while the alarms were part of package host); match them with
// errors.Is, never by their text.
var (
	// ErrBadTime: an alarm's time is zero or before 1970 (the index
	// orders Unix milliseconds, which are never negative).
	ErrBadTime = errors.New("alarm: bad alarm time")
	// ErrWrongDatabase: the connection or transaction given to an alarm
	// operation is not on the actor's database.
	ErrWrongDatabase = errors.New("alarm: not the actor's database")
	// ErrBadRow: the alarm table holds what this package never writes.
	ErrBadRow = errors.New("alarm: bad alarm row")
	// ErrContended: a set or delete outside a transaction lost the race
	// with other alarm writes of the actor several times in a row.
	ErrContended = errors.New("alarm: alarm changed concurrently")
)

// Querier is what the alarm operations need of the caller's connection:
// *sql.Tx (the alarm commits with the caller's other writes), *sql.Conn or
// *sql.DB (it commits on its own), on the actor's database (Actor.DSN).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Alarm is an actor's alarm: when it is due (millisecond precision), and
// its generation, which every set, delete and clear of the actor's alarm
// increments, so that an alarm set again for the same time is a new one.
type Alarm struct {
	Due time.Time
	Gen uint64
}

// table is this package's table in the actor's database. It holds one
// row, id 1, once the actor set an alarm; due NULL is no alarm (the row
// stays, keeping the generation). Part of the database's format: its
// name, columns and checks are what every earlier release wrote.
const table = "framectl_alarm"

const schema = `CREATE TABLE IF NOT EXISTS ` + table + `(
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	due INTEGER CHECK (due IS NULL OR due >= 0), -- Unix milliseconds
	gen INTEGER NOT NULL CHECK (gen >= 1)
) STRICT`

// row is what the alarm table holds: gen 0 when it has no row (or does
// not exist), set false when due is NULL.
type row struct {
	due uint64
	gen uint64
	set bool
}

func (r row) alarm() Alarm { return Alarm{Due: time.UnixMilli(int64(r.due)), Gen: r.gen} }

// maxAttempts bounds the compare-and-swap retries of a set or delete
// outside a transaction. Inside one it never retries: the transaction's
// reads and its write see one state.
const maxAttempts = 8

// Get returns the actor's alarm as q sees it, and false if it has none.
func (s *Session) Get(ctx context.Context, q Querier) (Alarm, bool, error) {
	if err := s.checkDatabase(ctx, q); err != nil {
		return Alarm{}, false, err
	}
	r, err := s.read(ctx, q)
	if err != nil || !r.set {
		return Alarm{}, false, err
	}
	return r.alarm(), true, nil
}

// Set sets the actor's alarm to due, replacing any alarm it has. Given a
// transaction (tx), the alarm commits with it, or not at all.
//
// The alarm's index entry is written to the bucket before Set returns, so
// before the caller can commit, and so before the alarm can be
// acknowledged; a transaction that rolls back leaves an entry behind that
// is deleted later. Set waits for that write, so call it before the
// transaction's other writes take SQLite's write lock if the actor's other
// writers must not wait for the bucket.
func (s *Session) Set(ctx context.Context, tx Querier, due time.Time) (Alarm, error) {
	ms := due.UnixMilli()
	if due.IsZero() || ms < 0 {
		return Alarm{}, fmt.Errorf("%w: %v", ErrBadTime, due)
	}
	if err := s.checkDatabase(ctx, tx); err != nil {
		return Alarm{}, err
	}
	for range maxAttempts {
		old, err := s.read(ctx, tx)
		if err != nil {
			return Alarm{}, err
		}
		next := row{due: uint64(ms), gen: old.gen + 1, set: true}
		// The entry first: nothing this call writes can commit before it.
		if err := s.putEntry(ctx, next); err != nil {
			return Alarm{}, err
		}
		s.noteEntries(old, next)
		if old.gen == 0 {
			if _, err := tx.ExecContext(ctx, schema); err != nil {
				return Alarm{}, s.errf("creating "+table, err)
			}
		}
		ok, err := s.swap(ctx, tx, old, next)
		if err != nil {
			return Alarm{}, err
		}
		if ok {
			// A look at its time: in a transaction that has not committed
			// by then, the look finds the old alarm, and the settle after
			// the writer's release looks again.
			s.svc.schedule(s, next.alarm().Due)
			return next.alarm(), nil
		}
	}
	return Alarm{}, fmt.Errorf("%w: %s", ErrContended, s)
}

// Delete deletes the actor's alarm, if it has one. Given a transaction,
// the deletion commits with it. The alarm's index entry is deleted once
// the deletion is durable.
func (s *Session) Delete(ctx context.Context, tx Querier) error {
	if err := s.checkDatabase(ctx, tx); err != nil {
		return err
	}
	for range maxAttempts {
		old, err := s.read(ctx, tx)
		if err != nil || !old.set {
			return err
		}
		next := row{gen: old.gen + 1}
		s.noteEntries(old, next)
		ok, err := s.swap(ctx, tx, old, next)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: %s", ErrContended, s)
}

// Clear deletes the actor's alarm only if it is still ran (the same time
// and generation), and reports whether it did: an alarm set again since
// ran was read, even for the same time, survives. It is how an alarm that
// ran is cleared without losing one its handler set.
func (s *Session) Clear(ctx context.Context, tx Querier, ran Alarm) (bool, error) {
	if err := s.checkDatabase(ctx, tx); err != nil {
		return false, err
	}
	old, err := s.read(ctx, tx)
	if err != nil || !old.set || old.gen != ran.Gen || int64(old.due) != ran.Due.UnixMilli() {
		return false, err
	}
	next := row{gen: old.gen + 1}
	s.noteEntries(old, next)
	return s.swap(ctx, tx, old, next)
}

// read reads the alarm table: gen 0 if it has no row or does not exist.
// Its values are checked, since anything with a connection can write the
// actor's database.
func (s *Session) read(ctx context.Context, q Querier) (row, error) {
	var tables int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&tables); err != nil {
		return row{}, s.errf("reading the schema", err)
	}
	if tables == 0 {
		return row{}, nil
	}
	var (
		due sql.NullInt64
		gen int64
	)
	err := q.QueryRowContext(ctx, `SELECT due, gen FROM `+table+` WHERE id = 1`).Scan(&due, &gen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return row{}, nil
	case err != nil:
		return row{}, s.errf("reading "+table, err)
	case gen < 1 || due.Valid && due.Int64 < 0:
		return row{}, fmt.Errorf("%w: %s in %s: due %v, gen %d", ErrBadRow, table, s, due, gen)
	}
	return row{due: uint64(due.Int64), gen: uint64(gen), set: due.Valid}, nil
}

// swap writes next if the table still holds old's generation (and no row
// when old has none), and reports whether it did. Every write of the row
// goes through it, so that the generations a database commits are 1, 2,
// 3, ... with no two commits of one: the index's staleness rule
// (entryStale) depends on it.
func (s *Session) swap(ctx context.Context, q Querier, old, next row) (bool, error) {
	due := sql.NullInt64{Int64: int64(next.due), Valid: next.set}
	var (
		res sql.Result
		err error
	)
	if old.gen == 0 {
		res, err = q.ExecContext(ctx, `INSERT INTO `+table+`(id, due, gen) VALUES(1, ?, ?) ON CONFLICT(id) DO NOTHING`, due, int64(next.gen))
	} else {
		res, err = q.ExecContext(ctx, `UPDATE `+table+` SET due = ?, gen = ? WHERE id = 1 AND gen = ?`, due, int64(next.gen), int64(old.gen))
	}
	if err != nil {
		return false, s.errf("writing "+table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.errf("writing "+table, err)
	}
	return n == 1, nil
}

// checkDatabase makes sure q is on this actor's database: an alarm
// written into another actor's database would be indexed under this one.
func (s *Session) checkDatabase(ctx context.Context, q Querier) error {
	var file string
	if err := q.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		return s.errf("reading the database's file", err)
	}
	path := s.actor.Path()
	mine, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("alarm: %s: %w", s, err)
	}
	if theirs, err := os.Stat(file); err != nil || !os.SameFile(mine, theirs) {
		return fmt.Errorf("%w: %s is %s, the connection's is %q", ErrWrongDatabase, s, path, file)
	}
	return nil
}

func (s *Session) errf(what string, err error) error {
	return fmt.Errorf("alarm: %s: %s: %w", s, what, err)
}

// entryKey returns the index key of an alarm row that is set.
func (s *Session) entryKey(r row) string {
	return s.svc.actorOf(s.key).AlarmKey(r.due, r.gen)
}
