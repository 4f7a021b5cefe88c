// Package fence owns who may write an actor: node leases (nodes/<node>.json,
// renewed heartbeats), ownership records (do/<ns>/<actor>/own.json: epoch,
// node, address), claims, release, and fencing of owners whose lease ran
// out.
//
// It must never let two nodes acknowledge writes to one actor in the same
// epoch, never judge another node's liveness by wall clocks, never judge
// its own lease by a clock that stops while the machine is suspended, and
// never treat a record it cannot parse as absent.
package fence
