// Package quorum runs the follower protocol of package follow on one node:
// the owner's side for each actor the node owns (Session, which is what
// vfs.Config.Peers takes), the follower's side for each actor it follows
// (over a tails.Store), and the routing between them and the transport
// (package peer) by actor and message kind (Hub.Handle).
//
// What it must never do: report as acknowledged (Session.Acked) anything
// follow.Owner does not; answer for a follower before tails.Store made
// the state it reports durable (Store.Handle's reply is the only one
// sent); start a session's owner before its takeover finished; record
// in own.json a set the owner does not send to. What the messages mean
// is follow's; how they travel, peer's; which nodes are alive and where
// they listen, the Directory's (package host's, from fence's leases).
//
// # One hub per node
//
// A node has one transport (one connection per pair of nodes, whatever
// the actors) and one Hub. The hub delivers Fence and Append messages to
// the follower store (the node follows the actor), Promise, Ack and
// Refuse messages to the actor's Session (the node owns it; none: the
// message is late and dropped). A message the hub sends to itself (a new
// owner that followed its predecessor fences its own store) is delivered
// in-process, never over the network. One goroutine ticks every session
// (Config.Tick): what follow wants resent is resent, a takeover's wait
// runs out. Another looks at every session's set each Config.ReplaceCheck,
// with one listing of the live followers for all (replace.go).
//
// # A session
//
// Session.Takeover fences the followers the replaced own.json recorded
// and waits for follow's rule (n-q+1 answers; follow.TakeoverConfig.Wait
// at most, then the error, and the actor stays closed rather than lose a
// commit). Session.Start chooses the new set from Directory.Candidates:
// Config.Followers of them (default DefaultFollowers), quorum a majority
// (n/2+1) unless Config.Quorum says otherwise; fewer candidates, fewer
// followers; none, none (every acknowledgement the bucket's, at once). It
// records the set in own.json (Directory.Record) before the first commit
// is sent, then starts the follow.Owner at the bucket's durable point:
// the new followers hold nothing the bucket lacks, so none waits to catch
// up.
//
// # Replacing a follower
//
// A follower that failed (it refused as full or broken) or that no live
// node serves any more is replaced while the session runs, by a live node
// outside the set, in follow's three steps, own.json recording the new set
// before it alone counts (replace.go says when a change is given up, and
// what a set with nobody to spare does). Session.Close returns the claim
// with the version of own.json the last replacement wrote, for the
// release. While a set has more than n-q members failed or unreachable,
// acknowledgements are the bucket's: Session.Acked reports no quorum once
// a replacement check saw them failed or unserved, and until then vfs asks
// the bucket after PeerWait.
package quorum
