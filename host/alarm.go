package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// The actors' alarms are package alarm's (go doc ./alarm): the host
// implements its Host (hostForAlarms) and, for each actor, its Actor
// (actorForAlarm), and tells each actor's alarm.Session where the actor
// is in its lifecycle.

// AlarmFunc runs an actor's alarm, on the node that holds the actor, once
// it is due. It returns nil when the alarm's work is done: the host then
// clears the alarm, unless it was set again meanwhile (by the handler
// itself, or a request), and the alarm's index entry is deleted once the
// clear is durable. An error runs it again later (retries with backoff);
// so does a run cut short by the node's death: delivery is at least once.
// Its ctx ends at Config.AlarmTimeout, when the host closes, or when the
// node is lost.
type AlarmFunc func(ctx context.Context, a *Actor, run alarm.Run) error

// Names of package alarm's, kept for one release.
type (
	// Deprecated: use alarm.Alarm.
	Alarm = alarm.Alarm
	// Deprecated: use alarm.Run.
	AlarmRun = alarm.Run
	// Deprecated: use alarm.Querier.
	Querier = alarm.Querier
	// Deprecated: use alarm.Entry.
	AlarmEntry = alarm.Entry
	// Deprecated: use alarm.Page.
	AlarmPage = alarm.Page
	// Deprecated: use alarm.Stats.
	AlarmStats = alarm.Stats
)

// Defaults of package alarm's, kept for one release.
const (
	// Deprecated: use alarm.DefaultScanEvery.
	DefaultAlarmScanEvery = alarm.DefaultScanEvery
	// Deprecated: use alarm.DefaultTimeout.
	DefaultAlarmTimeout = alarm.DefaultTimeout
)

// Errors of package alarm's, kept for one release.
var (
	// Deprecated: use alarm.ErrBadTime.
	ErrBadAlarmTime = alarm.ErrBadTime
	// Deprecated: use alarm.ErrWrongDatabase.
	ErrWrongDatabase = alarm.ErrWrongDatabase
	// Deprecated: use alarm.ErrBadRow.
	ErrBadAlarmRow = alarm.ErrBadRow
	// Deprecated: use alarm.ErrContended.
	ErrAlarmContended = alarm.ErrContended
)

// Alarm returns the actor's alarm as q sees it, and false if it has none
// (alarm.Session.Get).
func (a *Actor) Alarm(ctx context.Context, q alarm.Querier) (alarm.Alarm, bool, error) {
	return a.alarm.Get(ctx, q)
}

// SetAlarm sets the actor's alarm to due, replacing any alarm it has.
// Given a transaction (tx), the alarm commits with it, or not at all.
//
// The alarm's index entry is written to the bucket before SetAlarm
// returns, so before the caller can commit, and so before the alarm can
// be acknowledged; a transaction that rolls back leaves an entry behind
// that the host deletes later. SetAlarm waits for that write, so call it
// before the transaction's other writes take SQLite's write lock if the
// actor's other writers must not wait for the bucket (alarm.Session.Set).
func (a *Actor) SetAlarm(ctx context.Context, tx alarm.Querier, due time.Time) (alarm.Alarm, error) {
	return a.alarm.Set(ctx, tx, due)
}

// DeleteAlarm deletes the actor's alarm, if it has one. Given a
// transaction, the deletion commits with it. The alarm's index entry is
// deleted once the deletion is durable (alarm.Session.Delete).
func (a *Actor) DeleteAlarm(ctx context.Context, tx alarm.Querier) error {
	return a.alarm.Delete(ctx, tx)
}

// ClearAlarm deletes the actor's alarm only if it is still ran (the same
// time and generation), and reports whether it did: an alarm set again
// since ran was read, even for the same time, survives. It is how an
// alarm that ran is cleared without losing one its handler set
// (alarm.Session.Clear).
func (a *Actor) ClearAlarm(ctx context.Context, tx alarm.Querier, ran alarm.Alarm) (bool, error) {
	return a.alarm.Clear(ctx, tx, ran)
}

// ListAlarms lists the alarm index of a namespace in due order, from the
// first key after startAfter: "" for the start, a previous page's Last,
// or frames.AlarmDueAfter(id, ms) with the namespace's frames.NamespaceID
// for the entries due at or after a time. limit 0 is the bucket's page
// size (alarm.Service.List).
func (h *Host) ListAlarms(ctx context.Context, namespace, startAfter string, limit int) (alarm.Page, error) {
	return h.alarms.List(ctx, namespace, startAfter, limit)
}

// alarmConfig is the configuration of the host's alarms.
func (h *Host) alarmConfig() alarm.Config {
	cfg := h.cfg
	namespaces := make([]string, 0, len(cfg.Alarms))
	for ns := range cfg.Alarms {
		namespaces = append(namespaces, ns)
	}
	return alarm.Config{
		Bucket: cfg.Bucket, Tenant: cfg.VFS.Tenant, Namespaces: namespaces,
		ScanEvery: cfg.AlarmScanEvery, Timeout: cfg.AlarmTimeout, Backoff: cfg.alarmBackoff,
		Lease: cfg.Lease, Grace: cfg.Grace, Clock: cfg.Clock,
		Logger: h.log, // the host's own lines, as they were
	}
}

// hostForAlarms is the Host as package alarm sees it.
type hostForAlarms struct{ h *Host }

var _ alarm.Host = hostForAlarms{}

func (x hostForAlarms) Acquire(ctx context.Context, key alarm.Key) (*alarm.Session, func(), error) {
	hd, err := x.h.Acquire(ctx, key.Namespace, []byte(key.ID))
	if errors.Is(err, ErrDraining) && !errors.Is(err, fence.ErrNotClaiming) {
		// Refused as the drain began: not claiming either.
		err = fmt.Errorf("%w (%w)", err, fence.ErrNotClaiming)
	}
	if err != nil {
		return nil, nil, err
	}
	return hd.alarm, hd.Release, nil
}

func (x hostForAlarms) Node() *fence.Node { return x.h.Node() }

func (x hostForAlarms) Draining() bool {
	x.h.mu.Lock()
	defer x.h.mu.Unlock()
	return x.h.draining
}

// actorForAlarm is an Actor as its alarm.Session sees it. Its database and
// node are read once the open set them (Session.Index is the first use).
type actorForAlarm struct{ a *Actor }

var _ alarm.Actor = actorForAlarm{}

func (x actorForAlarm) Path() string                      { return x.a.db.Path() }
func (x actorForAlarm) DSN() string                       { return x.a.db.DSN() }
func (x actorForAlarm) Durable(ctx context.Context) error { return x.a.db.Durable(ctx) }
func (x actorForAlarm) Commits() int64                    { return x.a.db.Stats().Commits }
func (x actorForAlarm) Epoch() frames.Epoch               { return x.a.db.Epoch() }
func (x actorForAlarm) Lost() <-chan struct{}             { return x.a.node.Done() }
func (x actorForAlarm) Unusable() error                   { return x.a.unusable() }
func (x actorForAlarm) Use() bool                         { return x.a.h.useForAlarm(x.a) }
func (x actorForAlarm) Release(touched bool)              { x.a.h.releaseUse(x.a, touched) }

func (x actorForAlarm) Run(ctx context.Context, run alarm.Run) error {
	return x.a.h.cfg.Alarms[x.a.key.ns](ctx, x.a, run)
}

// useForAlarm takes a use of an actor for its alarm (a run, a settle) if
// the host serves it: open, not dropped, the host not stopped.
func (h *Host) useForAlarm(a *Actor) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a.state != Open || a.drop || h.stopErr != nil {
		return false
	}
	a.refs++
	return true
}
