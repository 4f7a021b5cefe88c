// Package quorum runs the follower protocol of package follow on one node,
// with the I/O follow leaves out: the owner's side for each actor the node
// owns (Session, the session.Peers that session.Config.Peers takes), the follower's
// side for each actor it follows (handed to a tails.Store, which runs
// follow.Follower on disk), the routing between them
// and the transport by actor and message kind (Hub.Handle), the clock that
// lets the protocol's time pass, and the directory of followers (Directory;
// Leases reads it from fence's node leases).
//
// What it must never do: decide anything the protocol decides (what to
// send, merge, resend or acknowledge, which tail a takeover recovers, when
// a new follower counts): that is follow's, and this package only carries
// out what follow.Owner, follow.Takeover and follow.GroupCommit return;
// report as acknowledged (Session.Acked) anything follow.Owner does not;
// send for a follower any reply but the one tails.Store.Handle returned
// once the state it reports was on disk; start an owner before own.json
// records the set it starts with, or tell it a new set is recorded
// (Owner.Recorded) before the write of own.json landed. How messages
// travel is package peer's; where the follower store keeps its state,
// package tails's.
//
// # One hub per node
//
// A node has one transport (package peer: one connection carries every
// actor two nodes share) and one Hub, which names an actor by ActorName,
// the same on every node. The hub hands Fence and Append messages to the
// node's follower store (Config.Store; nil: the node follows nobody and
// drops them) and sends back the reply the store returned; Promise, Ack
// and Refuse go to the actor's Session (none on this node: the reply is
// late and dropped, Stats.Late). A message the hub sends to itself (a new
// owner that followed its predecessor fences its own store) is delivered
// in-process, never over the network; a send the transport refuses is a
// lost message, which follow resends. One goroutine ticks every session
// each Config.Tick: a takeover re-sends its fences and runs out its wait,
// an owner resends what was not acknowledged. Another looks at every
// session's set each Config.ReplaceCheck, with one listing of the live
// followers for all (replace.go). Stats counts what the hub did, the
// fences its store promised among it (fences.go).
//
// # A session
//
// Session.Takeover fences the followers the replaced own.json recorded
// (its set and quorum), after it asked the Directory to locate each one
// but this node (one it cannot locate is not fatal: the takeover waits for
// n-q+1 of them), and waits for follow's takeover: n-q+1 answers within
// Config.TakeoverWait (default follow.DefaultWait), or the error, and the actor
// stays closed rather than lose a commit. It returns the tail the
// takeover recovered past the bucket's durable point; with no followers
// recorded, nothing, at once.
//
// Session.Start chooses the new set from Directory.Candidates, in their
// order: up to Config.Followers of them (default DefaultFollowers) that
// the Directory locates, never this node; the quorum is a majority of
// those chosen (n/2+1), or Config.Quorum when set, at most n. Fewer
// candidates, fewer followers; none, none, and every acknowledgement is
// the bucket's. It records the set in own.json (Directory.Record) before
// anything is sent, then starts the follow.Owner at the point it is given,
// one the bucket holds: the followers' resets carry nothing, and no
// follower has anything to catch up on.
//
// Append and BucketDurable hand the owner the commits and the bucket's
// progress. Acked is the owner's Acked, and whether q members of the set
// can acknowledge now: not failed, and served by a live node at the last
// replacement check. Err is non-nil once a follower said a newer epoch
// fenced this one, or a write of own.json found a newer claim. Close waits
// for a write of own.json under way and returns the claim with the
// version of own.json the session last wrote, for the release. A Session
// runs one session of its actor at a time, the next (framectl.DB.Reopen)
// starting again at Takeover; a hub routes an actor's replies to one
// Session, and a second one that would send to followers fails at
// Takeover or Start.
//
// # Group commit
//
// An owner's messages go to the transport through follow.GroupCommit
// (follow: "Group commit"): one Append in flight to each follower, those
// queued meanwhile merged behind it. A follower's Ack or Refuse frees its
// window before the owner takes the reply, so what was held goes before
// what the owner sends in answer; the tick frees the windows whose answer
// is overdue (Config.Retransmit) before the owner's Tick. A follower that
// left the set, or a newcomer given up, is forgotten.
//
// # Replacing a follower
//
// A member that failed (it refused as full or broken) or that no live
// node serves any more (Directory.Candidates no longer lists it) is
// replaced while the session runs by a candidate outside the set, in
// follow's three steps (follow: "Replacing a follower"): own.json records
// the new set, with a write conditional on the claim, before it alone
// counts. replace.go says when a change is given up and what a set with
// nobody to spare does. While more than n-q members are failed or
// unlisted, Acked reports no quorum and vfs asks the bucket at once; a
// failed member is known at once, an unlisted one from the replacement
// check that saw it so (until then a Durable waits session.Config.PeerWait
// for followers that cannot answer, then asks the bucket).
//
// # The directory
//
// Leases is the Directory of a cluster whose nodes register in the bucket
// (package fence). A follower is its store (tails.Store.ID,
// fence.Lease.Follower), not the process serving it: one restarted on the
// store registers a new node and is still the follower that holds what it
// acknowledged. The candidates are the followers of the live leases, other
// than this node's, that give a peer address. A listing serves Candidates
// for CandidatesCache, and Locate for LocateFresh: a takeover locates the
// followers own.json names, one of which may have restarted at a new
// address since. Record writes the set into own.json, conditional on the
// claim (fence.Node.RecordFollowers).
//
// # Admitting a raise
//
// A follower's promise is for good: once it promised epoch E it refuses
// every older one. So before this node's store takes a message that would
// raise it (a Fence, or a reset: follow raises on nothing else) it reads
// the actor's own.json (Directory.Claimed) and admits the message only if
// the record is at E or newer, the message naming the actor as the bucket
// does (follow.Fence.Actor), the same actor the transport delivered it
// for. Otherwise it answers RefuseUnproven (Stats.Unproven), and the
// owner counts the follower as failed; a read that fails drops the message,
// which its sender sends again (Stats.ClaimReadErrors). A claimant writes
// own.json before its first message, so a correct owner always passes, at
// one GET per follower per takeover; a holder of the cluster key who is
// no owner cannot make a follower refuse the actor's next owner (admit.go).
package quorum
