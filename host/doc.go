// Package host owns the actors one node of an actor runtime serves: the
// node's lease (fence.Register), one open of each actor however many callers
// want it at once (single flight), claims retried while a dead holder's
// lease runs out, a bound on the opens and restores running at once, the
// release of idle actors (hibernation), a lock on each actor's data
// directory against a second process, recovery after the node lost its
// lease (a new node, framectl.DB.Reopen for the actors it held), a schedule of
// stale-lease sweeps (fence.SweepLeases), and an HTTP handler that serves
// a request where the actor is held here and forwards it, once, to the live
// node that holds it otherwise; the actors' alarms, through package alarm,
// which owns them; and the node's drain, which hands its actors over to
// its peers.
//
// It must never: hand out an actor whose database is not open for this
// node's current epoch, open one actor twice in a process, hibernate an
// actor a caller still holds, forward a request to itself or to a node
// whose lease it does not see live, forward a request that was forwarded
// already, let a slow client hold an actor open past the handler's
// deadlines, let the alarms (package alarm) use an actor it does not
// serve, claim an actor from anyone once it drains, hand out an actor
// claimed as its drain began, or release an actor before what its drain
// hook wrote is durable. It never acknowledges anything itself: what the
// runtime answers is held by framectl.DB.Durable (the output gate), and it
// never interprets what an actor's database holds (package alarm's table
// is package alarm's).
//
// # Lifecycle of an actor
//
// [Host.Acquire] returns a [Handle]: the actor's open, replicated database
// and what the runtime keeps beside it ([Actor.Value], made by
// [Hooks.Opened]). Concurrent Acquires of one actor share one open. A
// Handle counts as a use until [Handle.Release]; an actor in use is never
// closed for being idle, and one idle for [Config.Idle] (default 30 s) is
// closed (final flush) and released in own.json, so that its next Acquire,
// on any node, claims it with the next epoch. An actor whose database
// stopped (fenced, replication stopped) is closed once its last Handle is
// released, and opened anew by the next Acquire.
//
// Acquire returns a *fence.HeldError (errors.As; it matches fence.ErrHeld)
// when a live node elsewhere holds the actor: the runtime forwards the
// request there ([Host.Handler] does it for HTTP). Claims that cannot
// succeed yet but will once a dead holder's lease has run out are retried
// with backoff for as long as the caller's context allows (and a single
// flight's retries stop once no caller waits): the holder has no lease
// (fence.ErrHolderUnseen), the holder is a predecessor of this process at
// this node's address or one of this host's earlier nodes, or the holder
// is a node this host could not connect to when it forwarded a request
// (for Lease+Grace after that failure).
//
// # Recovery
//
// A node that loses its lease (an outage of the bucket longer than the
// lease, a pause, a peer that fenced it) can never acknowledge again. By
// default the host then registers a new node (fence.Node.Restart) as soon
// as the bucket answers, and reopens every actor it had open with
// framectl.DB.Reopen once the old node's lease has run out on the new node's
// clock; what those actors had committed but not uploaded follows
// session.Config.Unacknowledged (discarded by default with a node). Actors a
// peer took over meanwhile are given up. [Config.StopOnNodeLoss] makes the
// host stop instead ([Host.Done]), for a runtime that would rather exit and
// be restarted by its supervisor.
//
// # Acknowledgement by followers
//
// With Config.Peers the host is also a follower node: it keeps a follower
// store under Dir/tails (package tails; its ID, in the store's directory,
// is the follower's name in every follower set, so a restarted process on
// the same Dir is the same follower), listens for the follower transport
// (package peer, authenticated with the cluster key), advertises both in
// its lease (fence.Lease.Peer, Follower) and runs one quorum.Hub. Every
// actor it opens gets a quorum.Session as session.Config.Peers: the open takes
// over from the followers own.json names, chooses new ones among the live
// leases, and from then on Durable returns once a quorum of them hold a
// commit. A node that registers anew after losing its lease keeps the
// store, the transport and the hub.
//
// # Failover
//
// In peer mode a dead or silent holder is taken over by failure
// detection, not by its lease running out. The host watches the holder of
// every actor it forwards to (peer.Node.Watch), so that it hears the
// holder's heartbeats too. Once it has not heard the holder for
// PeersConfig.SuspectAfter (500 ms by default) it stops forwarding (a
// forward in flight is ended and answered 503: it was sent, so it may
// have run), retries the claim every 100 ms, and the claim takes the
// actor as soon as one of the followers own.json names confirms the
// silence (quorum.Suspicion; fence: "Claims on suspicion"). The takeover
// then fences those followers and recovers the tail they hold, as after a
// lease ran out. Measured on five real processes: 0.6–0.7 s from SIGKILL
// or SIGSTOP of the owner to the first write acknowledged by another node
// (BENCHMARKS.md, "Failover by failure detection"). A holder cut off from
// its followers but not from its callers loses its actors the same way;
// its callers get 503 and retry. A bucket-only actor (no followers) still
// waits for the holder's lease.
//
// # Differences from Durable Objects
//
// A runtime author coming from Cloudflare's Durable Objects should know:
//
//   - No input gate: handles of one actor are used concurrently. A runtime
//     that wants one event at a time per actor serializes them itself.
//   - The output gate is explicit: a reply may leave only after
//     framectl.DB.Durable returned nil; neither Acquire nor Handler calls it.
//   - Placement: an actor nobody holds is claimed by the node its request
//     reached; there is no routing to a preferred location.
//   - An idle actor is released after Config.Idle (30 s by default, as
//     wasmkeep) and its next request may start it on any node, from the
//     bucket or from a local copy that is still current.
//   - When the holder dies, requests wait (within the handler's timeout)
//     until this node can claim the actor, then run here: in peer mode
//     once failure detection confirms the holder gone (see Failover),
//     otherwise once its lease plus grace has run out. Past the timeout
//     they get 503 with Retry-After, as does a request whose forward
//     reached a holder that did not answer (it may have run there).
//   - Forwarding is one hop: a forwarded request that reaches a node that
//     does not hold the actor either is answered 503 with Retry-After.
//   - Alarms are Durable Objects' in what a handler sees, with the
//     differences package alarm's doc lists ("Differences from Durable
//     Objects"); a namespace's alarms fire only on nodes that registered
//     a handler for it (Config.Alarms).
//   - Drain hooks (below) run when a node drains, so that what a
//     runtime keeps in memory is written before the actor moves. They do
//     not run when a node dies: in-memory state is still lost then, as a
//     Durable Object's is when it is evicted.
//
// # Alarms
//
// Each actor's alarm is package alarm's (go doc ./alarm: its storage in
// the actor's database, its index in the bucket, when it fires, what a
// scan costs, and what it must never do). The host serves it: the
// runtime's operations are [Actor.SetAlarm], [Actor.Alarm],
// [Actor.DeleteAlarm] and [Actor.ClearAlarm], its handlers
// [Config.Alarms] ([AlarmFunc]), and [Host.ListAlarms] lists a
// namespace's index; the host implements alarm.Host, and tells each
// actor's alarm.Session where the actor is in its lifecycle (opened,
// released, closing, gone).
//
// # Drain
//
// A node that is told to stop (a deploy, a scale-down) drains: it hands
// its actors to its peers with their state, and no peer waits for its
// lease.
//
//  1. [Host.StopClaiming]: the node claims no actor from anyone any more:
//     an Acquire that would have to claim one that is absent, released or
//     held by a dead node fails with [ErrDraining] (Handler answers 503
//     with Retry-After, so the caller retries, through a node that is
//     not draining), and the alarm scan claims nothing. The node keeps
//     renewing its lease, so the actors it holds keep serving and being
//     acknowledged, and no peer can take them meanwhile; a live holder
//     elsewhere is still forwarded to. An actor whose own.json names this
//     node, though it is not open here, may still open (nobody else could
//     take it). An open under way when StopClaiming is called fails with
//     ErrDraining once it ends, whatever its claim replaced: it may have
//     taken the actor from someone as the drain began, and is released
//     at once, never handed out, rather than served by a node whose
//     drain hooks have started without it.
//  2. [Host.Drain] calls StopClaiming, then runs the drain hook
//     ([Config.Drain], [DrainFunc]) of every open actor of the
//     namespaces that have one, at most 32 at once per namespace, while
//     the actors still serve, and waits for each hook and for what it
//     wrote to be durable (framectl.DB.Durable). All hooks share one deadline,
//     [Config.DrainDeadline] (6 s by default, at most 10 s; negative: no
//     hook runs); a hook still running then has its context cancelled,
//     is counted timed out and no longer waited for. A hook that returns
//     an error, or panics, fails alone. An actor that opens while the
//     hooks run (one own.json gave this node) gets its hook in a later
//     round, until a round finds none or the deadline has passed.
//  3. Then, as [Host.Close], each actor is closed once its last Handle is
//     released (Hooks.Closing, final flush) and released in own.json
//     (node ""), so a peer claims it at once with the next epoch, from
//     everything it made durable; and the node deregisters (deletes its
//     lease). Acquire fails with ErrStopped from the end of the hooks.
//
// Drain returns a [DrainReport] (per namespace: drained, skipped,
// failed, timed out, how long) and logs one line per namespace with the
// same counts, a warning when a hook failed or timed out. Its error is
// Close's: a hook's failure costs only what that hook had not made
// durable, and its actor is released like the others.
//
// A runtime behind a load balancer calls StopClaiming, stops accepting
// connections and lets the requests in flight finish (http.Server's
// Shutdown), then calls Drain, all under its own deadline (the ctx of
// Drain). A runtime that would rather serve requests for its own actors
// while the hooks run calls Drain before Shutdown: requests that arrive
// after the hooks are answered 503 with Retry-After.
//
// # HTTP
//
// [Host.Handler] reads a request's body (bounded in size and time) before
// it acquires the actor, so a slow upload never holds an actor, and sets
// the connection's write deadline to the request's, so a slow reader of
// the answer holds it for the request's timeout at most. A request it
// forwards carries HeaderForwarded (the forwarder's node ID); the answer it
// relays carries HeaderVia. The header marks a request as forwarded and
// nothing more: a client that sends it only gives up being forwarded.
//
// # Stats
//
// [Host.Stats] says what the host holds now (its actors by state, the
// summed replication of those open, the alarms it will look at) and what
// it did since New (claims by outcome, its node's losses, the peers it
// fenced, actors dropped, alarm runs and how late they started), and, with
// Config.Peers, acknowledgement by followers (PeerStats: the hub's counts,
// acknowledgements by followers and by the bucket, the open actors'
// followers, failed ones, sessions below their quorum, follower lag in
// commits, the follower store's bytes). It names no actor: a node may hold
// many thousands. Package metrics exposes it to Prometheus.
//
// # What the runtime keeps
//
// The runtime keeps what is its own: its routes and what an actor's
// database holds (Hooks), the output gate, and the process: its listener,
// signals, exit codes, and the way out. A runtime that stops serving calls
// [Host.StopClaiming] and its HTTP server's Shutdown first (so every
// Handle of Handler's is released), then [Host.Drain] (or [Host.Close],
// which runs no hooks), all under the runtime's own deadline; the drain
// hooks have theirs (see "Drain"). examples/actorhost is such a runtime,
// thin glue on this package.
package host
