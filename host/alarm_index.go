package host

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ncruces/go-sqlite3/driver"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// alarmConnIdle is how long the host's connection to an actor's database
// stays open unused.
const alarmConnIdle = 30 * time.Second

// settleTimeout bounds one settle of an actor's alarm index entries in
// the background: a Durable wait and one batch of deletes.
const settleTimeout = time.Minute

// alarmNote is an index entry an Actor wrote or superseded and has not
// deleted; n orders the notes, so that a settle forgets only what it
// looked at.
type alarmNote struct {
	k frames.Key
	n uint64
}

// putAlarmEntry writes the index entry of a set alarm row. It is empty:
// the key says everything.
func (a *Actor) putAlarmEntry(ctx context.Context, r alarmRow) error {
	key := a.alarmKey(r)
	if _, err := a.h.cfg.Bucket.Put(ctx, key, bytes.NewReader(nil), 0, bucket.Condition{}); err != nil {
		return fmt.Errorf("host: %s: writing its alarm index entry: %w", a, err)
	}
	return nil
}

// noteAlarmEntries remembers the entries a write from old to next makes
// stale once it is durable (old's), or writes (next's, stale if the write
// never commits).
func (a *Actor) noteAlarmEntries(old, next alarmRow) {
	a.amu.Lock()
	defer a.amu.Unlock()
	if a.alarmKeys == nil {
		a.alarmKeys = map[string]alarmNote{}
	}
	for _, r := range []alarmRow{old, next} {
		if !r.set {
			continue
		}
		key := a.alarmKey(r)
		k, err := frames.ParseKey(key)
		if err != nil {
			panic(fmt.Sprintf("host: the alarm key %s does not parse: %v", key, err)) // AlarmKey's output always does
		}
		a.alarmNotes++
		a.alarmKeys[key] = alarmNote{k: k, n: a.alarmNotes}
	}
	a.alarmDirty = true
}

// noteEntry remembers an index entry of this actor that the scan found
// overdue, unless it is noted already: the next settle deletes it if the
// database's durable alarm makes it stale.
func (a *Actor) noteEntry(key string) {
	k, err := frames.ParseKey(key)
	if err != nil {
		return // ListAlarms returns only keys that parse
	}
	a.amu.Lock()
	defer a.amu.Unlock()
	if _, ok := a.alarmKeys[key]; ok {
		return
	}
	if a.alarmKeys == nil {
		a.alarmKeys = map[string]alarmNote{}
	}
	a.alarmNotes++
	a.alarmKeys[key] = alarmNote{k: k, n: a.alarmNotes}
	a.alarmDirty = true
}

// settleSoonLocked starts a settle of the actor's index entries in the
// background, holding a use of the actor, if an alarm write (or a note)
// since the last one may have made an entry stale and none runs. Called
// with h.mu held.
func (h *Host) settleSoonLocked(a *Actor) bool {
	if a.state != Open || a.drop || h.stopErr != nil || a.settling || !a.alarmsToSettle() {
		return false
	}
	a.settling = true
	a.refs++
	h.bg.Add(1)
	go h.settleInBackground(a)
	return true
}

// setInFlight reports whether this actor noted a set due by now that the
// database's alarm cur does not hold yet: its transaction has not
// committed (or rolled back, which only the actor's close can tell).
func (a *Actor) setInFlight(cur alarmRow, now time.Time) bool {
	a.amu.Lock()
	defer a.amu.Unlock()
	for _, n := range a.alarmKeys {
		if n.k.Gen > cur.gen && int64(n.k.Due) <= now.UnixMilli() {
			return true
		}
	}
	return false
}

// alarmsToSettle reports whether an alarm write since the last settle may
// have made an index entry stale.
func (a *Actor) alarmsToSettle() bool {
	a.amu.Lock()
	defer a.amu.Unlock()
	return a.alarmDirty
}

// alarmEntryStale reports whether an index entry of an actor no longer
// names an alarm its database may hold, given cur, what the database
// holds durably. Generations commit as 1, 2, 3, ... (swapAlarm), so:
//   - an older generation was superseded by a commit that is durable;
//   - cur's generation for another time (or none) is a set that rolled
//     back, whose generation the next set took again;
//   - a newer generation is a set not committed yet, or one that never
//     will be: stale only when nothing can be in flight (quiescent).
func alarmEntryStale(k frames.Key, cur alarmRow, quiescent bool) bool {
	switch {
	case k.Gen < cur.gen:
		return true
	case k.Gen == cur.gen:
		return !cur.set || k.Due != cur.due
	}
	return quiescent
}

// settleAlarms deletes the index entries this Actor noted that its
// database's durable alarm makes stale. Quiescent: no alarm write can be
// in flight (the actor is closing). It reads the alarm first and waits
// for Durable second, so what it read is in the bucket before anything is
// deleted on its account.
func (h *Host) settleAlarms(ctx context.Context, a *Actor, quiescent bool) error {
	a.amu.Lock()
	a.alarmDirty = false
	notes := make(map[string]alarmNote, len(a.alarmKeys))
	for key, n := range a.alarmKeys {
		notes[key] = n
	}
	a.amu.Unlock()
	if len(notes) == 0 {
		return nil
	}
	pool, err := a.alarmConn()
	if err != nil {
		return err
	}
	cur, err := a.readAlarm(ctx, pool)
	if err != nil {
		return err
	}
	if cur.set {
		// A set the schedule has not seen commit (in a transaction that
		// committed after its time) is due to be looked at too.
		h.scheduleActor(a, cur.alarm().Due)
	}
	if err := a.db.Durable(ctx); err != nil {
		return fmt.Errorf("host: %s: settling its alarm index entries: %w", a, err)
	}
	var stale []string
	for key, n := range notes {
		if alarmEntryStale(n.k, cur, quiescent) {
			stale = append(stale, key)
		}
	}
	var delErr error
	if len(stale) > 0 {
		if delErr = h.cfg.Bucket.DeleteMany(ctx, stale); delErr != nil {
			delErr = fmt.Errorf("host: %s: deleting stale alarm index entries: %w", a, delErr)
		}
	}
	a.amu.Lock()
	defer a.amu.Unlock()
	for key, n := range notes {
		current := cur.set && n.k.Gen == cur.gen && n.k.Due == cur.due
		deleted := delErr == nil && alarmEntryStale(n.k, cur, quiescent)
		// Forget it only if nothing noted it again meanwhile: a write
		// that superseded it since needs the next settle.
		if (current || deleted) && a.alarmKeys[key].n == n.n {
			delete(a.alarmKeys, key)
		}
	}
	return delErr
}

// settleInBackground settles the actor's alarm index entries with a
// Handle's worth of use (taken by release), so the actor does not close
// meanwhile.
func (h *Host) settleInBackground(a *Actor) {
	defer h.bg.Done()
	ctx, cancel := context.WithTimeout(h.ctx, settleTimeout)
	err := h.settleAlarms(ctx, a, false)
	cancel()
	if err != nil {
		h.log.Debug("alarm index entries not settled yet", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, err)
	}
	h.mu.Lock()
	a.settling = false
	h.mu.Unlock()
	h.releaseUse(a, false)
}

// reindexAlarm writes the index entry of the alarm an actor's database
// holds as it opens, and schedules it. A database restored (from the
// bucket, to a point in time) or left by a node that died holds an alarm
// whose entry may be missing: each open makes it present again, before
// the actor serves. A table the host did not write is logged and left:
// the actor still opens. Entries of earlier sessions that the database no
// longer holds are deleted when they come due (overdueAlarm): finding
// them now would list the namespace's whole index, which is ordered by
// time, not by actor.
func (h *Host) reindexAlarm(ctx context.Context, a *Actor) error {
	pool, err := a.alarmConn()
	if err != nil {
		return err
	}
	cur, err := a.readAlarm(ctx, pool)
	switch {
	case errors.Is(err, ErrBadAlarmRow):
		h.log.Warn("alarm not indexed", logattr.Namespace, a.key.ns, logattr.Actor, frames.ActorKey([]byte(a.key.id)), logattr.Err, err)
		return nil
	case err != nil:
		return err
	case !cur.set:
		a.closeAlarmConn() // no alarm: nothing to keep a connection for
		return nil
	}
	if err := a.putAlarmEntry(ctx, cur); err != nil {
		return err
	}
	h.scheduleActor(a, cur.alarm().Due)
	return nil
}

// alarmConn returns the host's own connection to the actor's database,
// opened on first use and closed by closeAlarmConn.
func (a *Actor) alarmConn() (*sql.DB, error) {
	a.amu.Lock()
	defer a.amu.Unlock()
	if a.alarmPool == nil {
		pool, err := driver.Open(a.db.DSN())
		if err != nil {
			return nil, fmt.Errorf("host: %s: opening a connection: %w", a, err)
		}
		pool.SetMaxOpenConns(1)
		// An idle actor need not keep a SQLite connection for its alarm.
		pool.SetConnMaxIdleTime(alarmConnIdle)
		a.alarmPool = pool
	}
	return a.alarmPool, nil
}

func (a *Actor) closeAlarmConn() {
	a.amu.Lock()
	defer a.amu.Unlock()
	if a.alarmPool != nil {
		a.alarmPool.Close()
		a.alarmPool = nil
	}
}

// AlarmEntry is one entry of a namespace's alarm index: the actor's
// database held (or was about to hold) an alarm of generation Gen due at
// Due. An entry can be stale (the alarm moved, was deleted or ran, or its
// transaction rolled back); only the actor's database says which.
type AlarmEntry struct {
	Key   string
	Actor []byte
	Due   time.Time
	Gen   uint64
}

// AlarmPage is one page of a namespace's alarm index, in due order.
type AlarmPage struct {
	Entries []AlarmEntry
	// Bad holds a *frames.Error for each key under the index that is not
	// an alarm entry of the namespace (errors.Is frames.ErrInvalid).
	Bad []error
	// More: ask again with StartAfter set to Last.
	More bool
	Last string
}

// ListAlarms lists the alarm index of a namespace in due order, from the
// first key after startAfter: "" for the start, a previous page's Last,
// or frames.AlarmDueAfter(id, ms) with the namespace's frames.NamespaceID
// for the entries due at or after a time. limit 0 is the bucket's page
// size.
func (h *Host) ListAlarms(ctx context.Context, namespace, startAfter string, limit int) (AlarmPage, error) {
	id := h.namespaceID(namespace)
	prefix := frames.AlarmIndexPrefix(id)
	page, err := h.cfg.Bucket.List(ctx, prefix, startAfter, limit)
	if err != nil {
		return AlarmPage{}, fmt.Errorf("host: listing the alarms of %s: %w", namespace, err)
	}
	out := AlarmPage{More: page.More}
	for _, info := range page.Objects {
		out.Last = info.Key
		k, err := frames.ParseKey(info.Key)
		switch {
		case err != nil:
		case k.Kind != frames.KeyAlarm || k.Namespace != id:
			err = &frames.Error{Object: "alarm index entry", Key: info.Key, Err: fmt.Errorf("%w: not an alarm entry of %s", frames.ErrInvalid, prefix)}
		case k.Due > math.MaxInt64:
			err = &frames.Error{Object: "alarm index entry", Key: info.Key, Err: fmt.Errorf("%w: due time out of range", frames.ErrInvalid)}
		}
		if err != nil {
			out.Bad = append(out.Bad, err)
			continue
		}
		actor, _ := hex.DecodeString(k.Actor) // ParseKey checked it
		out.Entries = append(out.Entries, AlarmEntry{Key: info.Key, Actor: actor, Due: time.UnixMilli(int64(k.Due)), Gen: k.Gen})
	}
	return out, nil
}

// namespaceID is a namespace's element in bucket keys.
func (h *Host) namespaceID(ns string) string { return frames.NamespaceID(h.cfg.VFS.Tenant, ns) }
