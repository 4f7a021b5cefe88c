package alarm

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

// connIdle is how long a Session's connection to the actor's database
// stays open unused.
const connIdle = 30 * time.Second

// settleTimeout bounds one settle of an actor's alarm index entries in
// the background: a Durable wait and one batch of deletes.
const settleTimeout = time.Minute

// note is an index entry a Session wrote or superseded and has not
// deleted; n orders the notes, so that a settle forgets only what it
// looked at.
type note struct {
	k frames.Key
	n uint64
}

// putEntry writes the index entry of a set alarm row. It is empty: the
// key says everything.
func (s *Session) putEntry(ctx context.Context, r row) error {
	key := s.entryKey(r)
	if _, err := s.svc.cfg.Bucket.Put(ctx, key, bytes.NewReader(nil), 0, bucket.Condition{}); err != nil {
		return fmt.Errorf("alarm: %s: writing its alarm index entry: %w", s, err)
	}
	return nil
}

// noteEntries remembers the entries a write from old to next makes stale
// once it is durable (old's), or writes (next's, stale if the write never
// commits).
func (s *Session) noteEntries(old, next row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notes == nil {
		s.notes = map[string]note{}
	}
	for _, r := range []row{old, next} {
		if !r.set {
			continue
		}
		key := s.entryKey(r)
		k, err := frames.ParseKey(key)
		if err != nil {
			panic(fmt.Sprintf("alarm: the alarm key %s does not parse: %v", key, err)) // AlarmKey's output always does
		}
		s.noted++
		s.notes[key] = note{k: k, n: s.noted}
	}
	s.dirty = true
}

// noteEntry remembers an index entry of this actor that the scan found
// overdue, unless it is noted already: the next settle deletes it if the
// database's durable alarm makes it stale.
func (s *Session) noteEntry(key string) {
	k, err := frames.ParseKey(key)
	if err != nil {
		return // List returns only keys that parse
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.notes[key]; ok {
		return
	}
	if s.notes == nil {
		s.notes = map[string]note{}
	}
	s.noted++
	s.notes[key] = note{k: k, n: s.noted}
	s.dirty = true
}

// settleSoonLocked reports whether a settle of the session's index
// entries is to start in the background, with a use of the actor, and
// marks it started: an alarm write (or a note) since the last one may have
// made an entry stale, the actor serves, and no settle runs. The caller
// takes the use and starts it (startSettle). Called with Service.mu held.
func (s *Session) settleSoonLocked() bool {
	if s.phase != serving || s.svc.stopped || s.settling || !s.toSettle() {
		return false
	}
	s.settling = true
	return true
}

// startSettle starts the settle settleSoonLocked marked, holding the use
// of the actor the caller took (ok).
func (s *Session) startSettle(ok bool) { s.startWithUse(ok, &s.settling, s.settleInBackground) }

// startWithUse starts work in the background, holding the use of the
// actor the caller took (ok), or, if the caller could not take one (the
// actor no longer serves), clears the mark (under Service.mu) that kept a
// second one from starting.
func (s *Session) startWithUse(ok bool, mark *bool, work func()) {
	if !ok {
		s.svc.mu.Lock()
		*mark = false
		s.svc.mu.Unlock()
		return
	}
	s.svc.bg.Add(1)
	go work()
}

// setInFlight reports whether this session noted a set due by now that
// the database's alarm cur does not hold yet: its transaction has not
// committed (or rolled back, which only the actor's close can tell).
func (s *Session) setInFlight(cur row, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.notes {
		if n.k.Gen > cur.gen && int64(n.k.Due) <= now.UnixMilli() {
			return true
		}
	}
	return false
}

// toSettle reports whether an alarm write since the last settle may have
// made an index entry stale.
func (s *Session) toSettle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirty
}

// entryStale reports whether an index entry of an actor no longer names
// an alarm its database may hold, given cur, what the database holds
// durably. Generations commit as 1, 2, 3, ... (swap), so:
//   - an older generation was superseded by a commit that is durable;
//   - cur's generation for another time (or none) is a set that rolled
//     back, whose generation the next set took again;
//   - a newer generation is a set not committed yet, or one that never
//     will be: stale only when nothing can be in flight (quiescent).
func entryStale(k frames.Key, cur row, quiescent bool) bool {
	switch {
	case k.Gen < cur.gen:
		return true
	case k.Gen == cur.gen:
		return !cur.set || k.Due != cur.due
	}
	return quiescent
}

// settle deletes the index entries this Session noted that its
// database's durable alarm makes stale. Quiescent: no alarm write can be
// in flight (the actor is closing). It reads the alarm first and waits
// for Durable second, so what it read is in the bucket before anything is
// deleted on its account.
func (s *Session) settle(ctx context.Context, quiescent bool) error {
	s.mu.Lock()
	s.dirty = false
	notes := make(map[string]note, len(s.notes))
	for key, n := range s.notes {
		notes[key] = n
	}
	s.mu.Unlock()
	if len(notes) == 0 {
		return nil
	}
	pool, err := s.conn()
	if err != nil {
		return err
	}
	cur, err := s.read(ctx, pool)
	if err != nil {
		return err
	}
	if cur.set {
		// A set the schedule has not seen commit (in a transaction that
		// committed after its time) is due to be looked at too.
		s.svc.schedule(s, cur.alarm().Due)
	}
	if err := s.actor.Durable(ctx); err != nil {
		return fmt.Errorf("alarm: %s: settling its alarm index entries: %w", s, err)
	}
	var stale []string
	for key, n := range notes {
		if entryStale(n.k, cur, quiescent) {
			stale = append(stale, key)
		}
	}
	var delErr error
	if len(stale) > 0 {
		if delErr = s.svc.cfg.Bucket.DeleteMany(ctx, stale); delErr != nil {
			delErr = fmt.Errorf("alarm: %s: deleting stale alarm index entries: %w", s, delErr)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, n := range notes {
		current := cur.set && n.k.Gen == cur.gen && n.k.Due == cur.due
		deleted := delErr == nil && entryStale(n.k, cur, quiescent)
		// Forget it only if nothing noted it again meanwhile: a write
		// that superseded it since needs the next settle.
		if (current || deleted) && s.notes[key].n == n.n {
			delete(s.notes, key)
		}
	}
	return delErr
}

// settleInBackground settles the actor's alarm index entries with a use
// of the actor (taken for it by the host, or by Actor.Use), so the actor
// does not close meanwhile.
func (s *Session) settleInBackground() {
	svc := s.svc
	defer svc.bg.Done()
	ctx, cancel := context.WithTimeout(svc.ctx, settleTimeout)
	err := s.settle(ctx, false)
	cancel()
	if err != nil {
		svc.log.Debug("alarm index entries not settled yet", logattr.Namespace, s.key.Namespace, logattr.Actor, s.key.hex(), logattr.Err, err)
	}
	svc.mu.Lock()
	s.settling = false
	svc.mu.Unlock()
	s.actor.Release(false)
}

// Index writes the index entry of the alarm the actor's database holds
// as it opens, and schedules it: the host calls it on each open, before
// the actor serves. A database restored (from the bucket, to a point in
// time) or left by a node that died holds an alarm whose entry may be
// missing: each open makes it present again. A table this package did not
// write is logged and left: the actor still opens. Entries of earlier
// sessions that the database no longer holds are deleted when they come
// due (Service.overdue): finding them now would list the namespace's
// whole index, which is ordered by time, not by actor.
func (s *Session) Index(ctx context.Context) error {
	pool, err := s.conn()
	if err != nil {
		return err
	}
	cur, err := s.read(ctx, pool)
	switch {
	case errors.Is(err, ErrBadRow):
		s.svc.log.Warn("alarm not indexed", logattr.Namespace, s.key.Namespace, logattr.Actor, s.key.hex(), logattr.Err, err)
		return nil
	case err != nil:
		return err
	case !cur.set:
		s.Disconnect() // no alarm: nothing to keep a connection for
		return nil
	}
	if err := s.putEntry(ctx, cur); err != nil {
		return err
	}
	s.svc.schedule(s, cur.alarm().Due)
	return nil
}

// conn returns the Session's own connection to the actor's database,
// opened on first use and closed by Disconnect.
func (s *Session) conn() (*sql.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool == nil {
		pool, err := driver.Open(s.actor.DSN())
		if err != nil {
			return nil, fmt.Errorf("alarm: %s: opening a connection: %w", s, err)
		}
		pool.SetMaxOpenConns(1)
		// An idle actor need not keep a SQLite connection for its alarm.
		pool.SetConnMaxIdleTime(connIdle)
		s.pool = pool
	}
	return s.pool, nil
}

// Disconnect closes the Session's own connection to the actor's
// database, if it has one: before the database closes, or after an open
// that failed once Index ran. A later use opens it again.
func (s *Session) Disconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
}

// Entry is one entry of a namespace's alarm index: the actor's database
// held (or was about to hold) an alarm of generation Gen due at Due. An
// entry can be stale (the alarm moved, was deleted or ran, or its
// transaction rolled back); only the actor's database says which.
type Entry struct {
	Key   string
	Actor []byte
	Due   time.Time
	Gen   uint64
}

// Page is one page of a namespace's alarm index, in due order.
type Page struct {
	Entries []Entry
	// Bad holds a *frames.Error for each key under the index that is not
	// an alarm entry of the namespace (errors.Is frames.ErrInvalid).
	Bad []error
	// More: ask again with StartAfter set to Last.
	More bool
	Last string
}

// List lists the alarm index of a namespace in due order, from the first
// key after startAfter: "" for the start, a previous page's Last, or
// frames.AlarmDueAfter(id, ms) with the namespace's frames.NamespaceID for
// the entries due at or after a time. limit 0 is the bucket's page size.
func (svc *Service) List(ctx context.Context, namespace, startAfter string, limit int) (Page, error) {
	id := svc.namespaceID(namespace)
	prefix := frames.AlarmIndexPrefix(id)
	page, err := svc.cfg.Bucket.List(ctx, prefix, startAfter, limit)
	if err != nil {
		return Page{}, fmt.Errorf("alarm: listing the alarms of %s: %w", namespace, err)
	}
	out := Page{More: page.More}
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
		out.Entries = append(out.Entries, Entry{Key: info.Key, Actor: actor, Due: time.UnixMilli(int64(k.Due)), Gen: k.Gen})
	}
	return out, nil
}

// namespaceID is a namespace's element in bucket keys.
func (svc *Service) namespaceID(ns string) string { return frames.NamespaceID(svc.cfg.Tenant, ns) }

// actorOf is an actor's element in bucket keys.
func (svc *Service) actorOf(k Key) frames.Actor {
	return frames.Actor{Namespace: svc.namespaceID(k.Namespace), Actor: k.hex()}
}
