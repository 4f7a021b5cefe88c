package session

import "github.com/framectl/framectl/internal/captured"

// Capture is the session's end of the capture: the calls the SQLite side
// makes for every write to the database's WAL and every commit
// (captured.Sink). The session hands it to Local.Attach; nothing else
// calls it.
type Capture struct{ r *replicator }

var _ captured.Sink = Capture{}

// Writable is called before every WAL write that starts or extends a
// transaction: nil at once while the backlog has room, a wait of up to
// Config.BackpressureTimeout when it is full (ErrBackpressure then), the
// stop error once replication stopped.
func (c Capture) Writable() error { return c.r.writable() }

// Commit numbers a commit and merges it into the batch being built (or
// queues it for the followers); the session releases it.
func (c Capture) Commit(cm *captured.Commit) { c.r.commit(cm) }

// Broken stops replication for good: the capture saw a write it cannot
// account for.
func (c Capture) Broken(err error) { c.r.broken(err) }

// PhaseTwo holds a Sync commit's statement until the commit is durable
// (Config.SyncTimeout: ErrSyncTimeout); nil at once in Async mode.
func (c Capture) PhaseTwo() error { return c.r.phaseTwo() }
