package session

import "github.com/framectl/framectl/internal/captured"

// sink is the session's end of the capture: the calls the SQLite side
// makes for every write to the database's WAL and every commit
// (captured.Sink). The session hands it to Local.Attach.
type sink struct{ r *replicator }

var _ captured.Sink = sink{}

// Writable is called before every WAL write that starts or extends a
// transaction: nil at once while the backlog has room, a wait of up to
// Config.BackpressureTimeout when it is full (ErrBackpressure then), the
// stop error once replication stopped.
func (c sink) Writable() error { return c.r.writable() }

// Commit numbers a commit and merges it into the batch being built (or
// queues it for the followers); the session releases it.
func (c sink) Commit(cm *captured.Commit) { c.r.commit(cm) }

// Broken stops replication for good: the capture saw a write it cannot
// account for.
func (c sink) Broken(err error) { c.r.broken(err) }

// PhaseTwo holds a Sync commit's statement until the commit is durable
// (Config.SyncTimeout: ErrSyncTimeout); nil at once in Async mode.
func (c sink) PhaseTwo() error { return c.r.phaseTwo() }
