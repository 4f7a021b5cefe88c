// Package alarm owns the alarms of the actors one node of an actor
// runtime serves: each actor's alarm, stored in the actor's database (a
// table this package owns), indexed by due time in the bucket, run by the
// node that holds the actor, and taken over by any node once nobody alive
// holds it. Package host serves the actors and wires this package in: it
// implements [Host] and, for each actor it opens, [Actor], and tells the
// actor's [Session] where the actor is in its lifecycle.
//
// It must never: let an alarm commit before its index entry is in the
// bucket, delete an index entry before the write that made it stale is
// durable, clear an alarm before its handler returned nil, clear one other
// than the one that ran, run two runs of one actor's alarm at once, run an
// alarm of an actor the host does not serve (another live node holds it,
// or the actor closes), claim an actor while the host drains, or call the
// host with its own lock held (the host calls it with the host's held).
// It never interprets what an actor's database holds beyond its own alarm
// table, and never imports package host.
//
// # The host
//
// [Host] is what the alarms need of the node: Acquire an actor on it (a
// claim if nobody alive holds it), its current node (whose Observer
// judges which other nodes are live), and whether it drains. [Actor] is
// one session of an actor: its database (file, DSN, Durable, commits),
// its epoch, the loss of the node that claimed it, a use of it that keeps
// it open (Use, Release), and the runtime's handler (Run). [Config] has
// the rest: the bucket, the tenant, the namespaces whose alarms the node
// runs, the lease timings, a clock and a logger.
//
// A [Session] is an actor's alarm for one session of it. The host makes
// it with [Service.NewSession] as the actor enters its map, and calls
// [Session.Index] on each open before the actor serves, [Session.Opened]
// once it hands the actor out, [Session.Released] after each use given
// back, [Session.Closing] when it drops or closes the actor,
// [Session.Finish] and [Session.Disconnect] before the database closes,
// and [Session.Gone] once the actor is out of its map; [Service.Stop]
// when it stops serving. The runtime's alarm operations
// ([Session.Set], [Session.Get], [Session.Delete], [Session.Clear]) are
// the host's Actor.SetAlarm, Alarm, DeleteAlarm and ClearAlarm.
//
// # Storage
//
// Each actor has at most one alarm, as a Durable Object has. Its
// operations run on the caller's connection or transaction ([Querier]),
// so an alarm commits with the actor's other writes, or not at all. It is
// stored in the actor's own database, in a table this package owns and
// creates on the first set:
//
//	CREATE TABLE framectl_alarm(
//		id  INTEGER PRIMARY KEY CHECK (id = 1),
//		due INTEGER CHECK (due IS NULL OR due >= 0), -- Unix milliseconds; NULL: none
//		gen INTEGER NOT NULL CHECK (gen >= 1)        -- +1 on every set, delete, clear
//	) STRICT
//
// so that whatever restores the database (the next owner, a restore to a
// point in time) restores its alarm with it. Every write of the row is a
// compare-and-swap on gen: the generations a database commits are 1, 2,
// 3, ..., never two commits of one.
//
// The bucket keeps an index of pending alarms per namespace,
// alarms/<namespace>/<due>/<actor>.<gen> (go doc ./frames, "Object keys"),
// in due order, which [Service.List] (the host's ListAlarms) lists from a
// start-after key. Its entries are hints about the actor's database,
// which is the truth:
//
//   - A set writes the new alarm's entry before it writes the row, so
//     before the transaction can commit: an alarm that can become durable
//     is always indexed.
//   - An entry becomes stale once a commit superseding it is durable: an
//     older generation, or the current generation for another time (a set
//     that rolled back). The Session deletes the stale entries a session
//     wrote or superseded after the writer released its use of the actor
//     (having waited for Durable itself), and, as the actor closes, also
//     the entries of sets that never committed.
//   - A stale entry left behind (a node that died, a delete that failed) is
//     harmless: whoever acts on an entry reads the actor's alarm first.
//
// The alarm of a [Session.Clear] is cleared only if it is still the one
// that ran (time and generation): one its handler set meanwhile, even for
// the same time, survives.
//
// # Firing
//
// Config.Namespaces names each namespace whose alarms the node fires (the
// host's Config.Alarms, which maps each to the runtime's handler, run
// through [Actor.Run]). The Service keeps one schedule (a heap of times,
// one goroutine) of when to look at each actor's alarm; a look reads the
// alarm from the actor's database, so a time in the schedule is only a
// hint.
//
//   - The holder runs the alarm at its time, holding a use of the actor
//     (it does not hibernate meanwhile). On success it clears the alarm
//     with Clear, so one the handler or a request set meanwhile survives
//     and runs at its own time, and waits until the clear is durable; the
//     index entry is deleted after that. A handler that fails is run
//     again 2 s after, then 4, 8, 16, 32 and 64 s after the run before
//     ([Run].Retry counts them); when the sixth retry fails, the alarm is
//     cleared and an error logged, as Durable Objects drop it. An actor
//     waiting for a retry is not hibernated ([Session.Retrying]).
//   - An actor hibernated with an alarm pending is acquired again by the
//     node that released it, at the alarm's time (a wake-up), and runs it
//     there unless another node holds it by then.
//   - Each open writes the index entry of the alarm the database holds
//     (a restored database, or one whose last holder died, may have none)
//     before the actor serves, and schedules it. Stale entries of earlier
//     sessions are deleted when they come due, not at the open: finding
//     them would list the namespace's whole index, which is ordered by
//     time, not by actor.
//   - Every Config.ScanEvery (2 s by default) each node looks at the
//     overdue entries of each namespace in Config.Namespaces. An entry
//     overdue by a second is acted on by whoever holds its actor: a node
//     serving it notes the entry (deleted once the database's durable
//     alarm makes it stale) and looks at the alarm; a live holder
//     elsewhere is left to do the same; an actor that nobody alive holds
//     (released, or held by a node whose lease this node's observer has
//     seen unchanged for lease + grace) is claimed here through
//     Host.Acquire, and its open runs the alarm (or finds the entry
//     stale). An actor whose claim or open fails is left alone twice as
//     long after each failure (from the scan interval up to 5 minutes),
//     so a broken one is not opened anew on every scan. A node that
//     drains claims nothing.
//
// Delivery is at least once: an alarm is cleared only after its handler
// returned nil, and the clear is a commit like any other; a node that
// dies (or loses its lease) before the clear is durable leaves the alarm
// set, indexed, for the actor's next holder. So an alarm whose holder
// died runs on another node once the observer there has seen the dead
// holder's lease unchanged for lease + grace, counted from the first scan
// that found the alarm overdue: about a second, plus lease + grace, plus
// up to two scan intervals after its time (17 to 19 s measured with the
// default 10 s + 5 s; BENCHMARKS.md).
//
// # What a scan costs
//
// A scan's requests do not grow with the overdue entries that live
// holders elsewhere keep (a handler that runs long or retries, a holder
// without the namespace's handler): a live holder runs its own actors'
// alarms, and a node need act on one only once its holder is dead. So
// the scans of a namespace remember each entry they left to a live holder
// elsewhere, with that holder, and the entries they must look at again
// (an actor being claimed, one whose claim failed, a holder not yet
// judged dead), and a scan is one of two kinds:
//
//   - A full scan lists the index from its start, in due order: one
//     listing of 100 entries, then of a thousand while they are overdue,
//     and the actor's own.json of each entry it remembers nothing of.
//     Entries it does not list are forgotten (deleted, or no longer
//     overdue).
//   - An incremental scan lists only the entries due since 10 s before
//     the previous scan's cutoff (one listing, while few come due), and
//     looks again at the entries to look at again.
//
// Either kind reads the lease of each holder it remembers once, whatever
// the number of its entries. The scan is a full one when one of them is
// no longer alive (it died, drained or closed: its entries are looked at
// anew, through own.json, and the actor is claimed once nobody alive
// holds it), the first time, after a wake-up of a hibernated
// actor failed, and every 5 minutes. A scan also rereads the own.json of
// at most 4 entries left to a live holder, each at most once per lease +
// grace, longest unread first, to catch an actor that a live holder
// released without running its overdue alarm (a holder without the
// namespace's handler that hibernated it): that actor is claimed, by the
// scan after the one that found it released, once its turn comes: with n
// such entries, after up to about n/4 scans or lease + grace, whichever
// is longer. An entry written due more than 10 s before a scan that
// already ran (a set for a time long past, an open that indexes an old
// alarm) is found by the next full scan if its holder dies, or releases
// the actor, before it runs: up to 5 minutes later than otherwise.
// Memory is bounded: past 65,536 remembered entries a namespace is
// scanned in full every time.
//
// # Differences from Durable Objects
//
// Alarms are Durable Objects' in what a handler sees (one per actor, at
// least once, retried 2, 4, 8, 16, 32, 64 s after a failure, then
// dropped, a retry count), with these differences: time has millisecond
// precision; the handler runs beside requests (no input gate); the retry
// count is the running node's, and starts from 0 when the actor moves to
// another node; an alarm set inside a transaction that commits after its
// time runs after that commit (at the latest a scan later); after its
// holder dies an alarm runs late, by about the holder's lease plus grace
// (see "Firing"); and a namespace's alarms fire only on nodes that
// registered a handler for it.
package alarm
