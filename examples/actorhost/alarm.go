package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/host"
)

// This runtime's alarms: one per actor, set, read and deleted through
// /actor/NS/ID/alarm, run by package host on the node that holds the
// actor (or, once nobody alive holds it, on any node), at least once.

// alarmJSON is an alarm as the routes answer it.
type alarmJSON struct {
	Due        time.Time `json:"due"`
	Generation uint64    `json:"generation"`
}

// maxAlarmBodyBytes bounds what a set's body may be: a time or a duration.
const maxAlarmBodyBytes = 64

// setAlarm sets the actor's alarm to the body's time: RFC 3339, or a
// duration from now ("90s").
func setAlarm(ctx context.Context, r *http.Request, d *actorDB) (any, error) {
	if !d.alarms {
		return nil, &statusError{http.StatusBadRequest, fmt.Sprintf("namespace %q: this node runs no alarms there (-alarm-namespaces)", d.actor.Namespace())}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAlarmBodyBytes+1))
	if err != nil || len(body) > maxAlarmBodyBytes {
		return nil, &statusError{http.StatusBadRequest, "the body is a time (RFC 3339) or a duration from now (90s)"}
	}
	due, err := parseAlarmTime(strings.TrimSpace(string(body)), time.Now())
	if err != nil {
		return nil, &statusError{http.StatusBadRequest, err.Error()}
	}
	// Outside wmu: SetAlarm writes the alarm's index entry to the bucket
	// before its own short transaction, and the other writers need not
	// wait for that round trip.
	set, err := d.actor.SetAlarm(ctx, d.sql, due)
	if err != nil {
		return nil, fmt.Errorf("setting the alarm: %w", err)
	}
	return alarmJSON{Due: set.Due.UTC(), Generation: set.Gen}, nil
}

func parseAlarmTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a time (RFC 3339) nor a duration from now (90s)", s)
}

func getAlarm(ctx context.Context, _ *http.Request, d *actorDB) (any, error) {
	a, ok, err := d.actor.Alarm(ctx, d.sql)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the alarm: %w", err)
	case !ok:
		return nil, &statusError{http.StatusNotFound, "no alarm"}
	}
	return alarmJSON{Due: a.Due.UTC(), Generation: a.Gen}, nil
}

func deleteAlarm(ctx context.Context, _ *http.Request, d *actorDB) (any, error) {
	if err := d.actor.DeleteAlarm(ctx, d.sql); err != nil {
		return nil, fmt.Errorf("deleting the alarm: %w", err)
	}
	return map[string]bool{"deleted": true}, nil
}

// alarmHandlers is host.Config.Alarms: the same trivial handler for every
// namespace named.
func alarmHandlers(namespaces map[string]bool) map[string]host.AlarmFunc {
	out := map[string]host.AlarmFunc{}
	for ns := range namespaces {
		out[ns] = runAlarm
	}
	return out
}

// runAlarm is what an alarm does here: append a note saying so. The host
// clears the alarm once this returned nil and the note is durable with
// the clear.
func runAlarm(ctx context.Context, a *host.Actor, run alarm.Run) error {
	d := a.Value().(*actorDB)
	_, err := d.addNote(ctx, fmt.Sprintf("alarm %s (generation %d, retry %d)", run.Due.UTC().Format(time.RFC3339Nano), run.Gen, run.Retry))
	return err
}
