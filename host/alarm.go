package host

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/framectl/framectl/frames"
)

// Errors of the alarm operations.
var (
	// ErrBadAlarmTime: an alarm's time is zero or before 1970 (the index
	// orders Unix milliseconds, which are never negative).
	ErrBadAlarmTime = errors.New("host: bad alarm time")
	// ErrWrongDatabase: the connection or transaction given to an alarm
	// operation is not on the actor's database.
	ErrWrongDatabase = errors.New("host: not the actor's database")
	// ErrBadAlarmRow: the alarm table holds what the host never writes.
	ErrBadAlarmRow = errors.New("host: bad alarm row")
	// ErrAlarmContended: a set or delete outside a transaction lost the
	// race with other alarm writes of the actor several times in a row.
	ErrAlarmContended = errors.New("host: alarm changed concurrently")
)

// Querier is what the alarm operations need of the caller's connection:
// *sql.Tx (the alarm commits with the caller's other writes), *sql.Conn or
// *sql.DB (it commits on its own), on the actor's database (Actor.DB's
// DSN).
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

// alarmTable is the host's table in the actor's database. It holds one
// row, id 1, once the actor set an alarm; due NULL is no alarm (the row
// stays, keeping the generation).
const alarmTable = "framectl_alarm"

const alarmSchema = `CREATE TABLE IF NOT EXISTS ` + alarmTable + `(
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	due INTEGER CHECK (due IS NULL OR due >= 0), -- Unix milliseconds
	gen INTEGER NOT NULL CHECK (gen >= 1)
) STRICT`

// alarmRow is what the alarm table holds: gen 0 when it has no row (or
// does not exist), set false when due is NULL.
type alarmRow struct {
	due uint64
	gen uint64
	set bool
}

func (r alarmRow) alarm() Alarm { return Alarm{Due: time.UnixMilli(int64(r.due)), Gen: r.gen} }

// maxAlarmAttempts bounds the compare-and-swap retries of a set or delete
// outside a transaction. Inside one it never retries: the transaction's
// reads and its write see one state.
const maxAlarmAttempts = 8

// Alarm returns the actor's alarm as q sees it, and false if it has none.
func (a *Actor) Alarm(ctx context.Context, q Querier) (Alarm, bool, error) {
	if err := a.checkDatabase(ctx, q); err != nil {
		return Alarm{}, false, err
	}
	r, err := a.readAlarm(ctx, q)
	if err != nil || !r.set {
		return Alarm{}, false, err
	}
	return r.alarm(), true, nil
}

// SetAlarm sets the actor's alarm to due, replacing any alarm it has.
// Given a transaction (tx), the alarm commits with it, or not at all.
//
// The alarm's index entry is written to the bucket before SetAlarm
// returns, so before the caller can commit, and so before the alarm can
// be acknowledged; a transaction that rolls back leaves an entry behind
// that the host deletes later. SetAlarm waits for that write, so call it
// before the transaction's other writes take SQLite's write lock if the
// actor's other writers must not wait for the bucket.
func (a *Actor) SetAlarm(ctx context.Context, tx Querier, due time.Time) (Alarm, error) {
	ms := due.UnixMilli()
	if due.IsZero() || ms < 0 {
		return Alarm{}, fmt.Errorf("%w: %v", ErrBadAlarmTime, due)
	}
	if err := a.checkDatabase(ctx, tx); err != nil {
		return Alarm{}, err
	}
	for range maxAlarmAttempts {
		old, err := a.readAlarm(ctx, tx)
		if err != nil {
			return Alarm{}, err
		}
		next := alarmRow{due: uint64(ms), gen: old.gen + 1, set: true}
		// The entry first: nothing this call writes can commit before it.
		if err := a.putAlarmEntry(ctx, next); err != nil {
			return Alarm{}, err
		}
		a.noteAlarmEntries(old, next)
		if old.gen == 0 {
			if _, err := tx.ExecContext(ctx, alarmSchema); err != nil {
				return Alarm{}, a.alarmErr("creating "+alarmTable, err)
			}
		}
		ok, err := a.swapAlarm(ctx, tx, old, next)
		if err != nil {
			return Alarm{}, err
		}
		if ok {
			// A look at its time: in a transaction that has not committed
			// by then, the look finds the old alarm, and the settle after
			// the writer's release looks again.
			a.h.scheduleActor(a, next.alarm().Due)
			return next.alarm(), nil
		}
	}
	return Alarm{}, fmt.Errorf("%w: %s", ErrAlarmContended, a)
}

// DeleteAlarm deletes the actor's alarm, if it has one. Given a
// transaction, the deletion commits with it. The alarm's index entry is
// deleted once the deletion is durable.
func (a *Actor) DeleteAlarm(ctx context.Context, tx Querier) error {
	if err := a.checkDatabase(ctx, tx); err != nil {
		return err
	}
	for range maxAlarmAttempts {
		old, err := a.readAlarm(ctx, tx)
		if err != nil || !old.set {
			return err
		}
		next := alarmRow{gen: old.gen + 1}
		a.noteAlarmEntries(old, next)
		ok, err := a.swapAlarm(ctx, tx, old, next)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: %s", ErrAlarmContended, a)
}

// ClearAlarm deletes the actor's alarm only if it is still ran (the same
// time and generation), and reports whether it did: an alarm set again
// since ran was read, even for the same time, survives. It is how an
// alarm that ran is cleared without losing one its handler set.
func (a *Actor) ClearAlarm(ctx context.Context, tx Querier, ran Alarm) (bool, error) {
	if err := a.checkDatabase(ctx, tx); err != nil {
		return false, err
	}
	old, err := a.readAlarm(ctx, tx)
	if err != nil || !old.set || old.gen != ran.Gen || int64(old.due) != ran.Due.UnixMilli() {
		return false, err
	}
	next := alarmRow{gen: old.gen + 1}
	a.noteAlarmEntries(old, next)
	return a.swapAlarm(ctx, tx, old, next)
}

// readAlarm reads the alarm table: gen 0 if it has no row or does not
// exist. Its values are checked, since anything with a connection can
// write the actor's database.
func (a *Actor) readAlarm(ctx context.Context, q Querier) (alarmRow, error) {
	var tables int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, alarmTable).Scan(&tables); err != nil {
		return alarmRow{}, a.alarmErr("reading the schema", err)
	}
	if tables == 0 {
		return alarmRow{}, nil
	}
	var (
		due sql.NullInt64
		gen int64
	)
	err := q.QueryRowContext(ctx, `SELECT due, gen FROM `+alarmTable+` WHERE id = 1`).Scan(&due, &gen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return alarmRow{}, nil
	case err != nil:
		return alarmRow{}, a.alarmErr("reading "+alarmTable, err)
	case gen < 1 || due.Valid && due.Int64 < 0:
		return alarmRow{}, fmt.Errorf("%w: %s in %s: due %v, gen %d", ErrBadAlarmRow, alarmTable, a, due, gen)
	}
	return alarmRow{due: uint64(due.Int64), gen: uint64(gen), set: due.Valid}, nil
}

// swapAlarm writes next if the table still holds old's generation (and no
// row when old has none), and reports whether it did. Every write of the
// row goes through it, so that the generations a database commits are
// 1, 2, 3, ... with no two commits of one: the index's staleness rule
// (alarmEntryStale) depends on it.
func (a *Actor) swapAlarm(ctx context.Context, q Querier, old, next alarmRow) (bool, error) {
	due := sql.NullInt64{Int64: int64(next.due), Valid: next.set}
	var (
		res sql.Result
		err error
	)
	if old.gen == 0 {
		res, err = q.ExecContext(ctx, `INSERT INTO `+alarmTable+`(id, due, gen) VALUES(1, ?, ?) ON CONFLICT(id) DO NOTHING`, due, int64(next.gen))
	} else {
		res, err = q.ExecContext(ctx, `UPDATE `+alarmTable+` SET due = ?, gen = ? WHERE id = 1 AND gen = ?`, due, int64(next.gen), int64(old.gen))
	}
	if err != nil {
		return false, a.alarmErr("writing "+alarmTable, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, a.alarmErr("writing "+alarmTable, err)
	}
	return n == 1, nil
}

// checkDatabase makes sure q is on this actor's database: an alarm
// written into another actor's database would be indexed under this one.
func (a *Actor) checkDatabase(ctx context.Context, q Querier) error {
	var file string
	if err := q.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		return a.alarmErr("reading the database's file", err)
	}
	mine, err := os.Stat(a.db.Path())
	if err != nil {
		return fmt.Errorf("host: %s: %w", a, err)
	}
	if theirs, err := os.Stat(file); err != nil || !os.SameFile(mine, theirs) {
		return fmt.Errorf("%w: %s is %s, the connection's is %q", ErrWrongDatabase, a, a.db.Path(), file)
	}
	return nil
}

func (a *Actor) alarmErr(what string, err error) error {
	return fmt.Errorf("host: %s: %s: %w", a, what, err)
}

// alarmKey returns the index key of an alarm row that is set.
func (a *Actor) alarmKey(r alarmRow) string {
	return frames.Actor{Namespace: a.h.namespaceID(a.key.ns), Actor: frames.ActorKey([]byte(a.key.id))}.AlarmKey(r.due, r.gen)
}
