// Package fence owns who may write an actor: node leases (nodes/<node>.json,
// renewed heartbeats), ownership records (do/<ns>/<actor>/own.json: epoch,
// node, address, follower set), claims, release, fencing of owners
// whose lease ran out, and which follower store may answer under a
// follower ID (followers/<follower>.json).
//
// It must never let two nodes acknowledge writes to one actor in the same
// epoch, never judge another node's liveness by wall clocks, never judge
// its own lease by a clock that stops while the machine is suspended,
// never treat a record it cannot parse as absent, and never drop the
// follower set of a held record it replaces.
//
// # Ownership record (own.json)
//
// do/<ns>/<actor>/own.json is the ownership record of one actor ([Record],
// encoded by [Record.Marshal], decoded by [ParseRecord]). Part of the bucket
// format:
//
//	{"epoch":7,"node":"4f1c...","address":"10.0.0.5:8080","retention":"24h0m0s"}
//	{"epoch":7,"node":"4f1c...","address":"10.0.0.5:8080","retention":"24h0m0s","followers":["9a0b...","c3d4...","e5f6..."],"quorum":2}
//	{"epoch":7,"node":"","address":"","seq":1234,"retention":"24h0m0s"}
//
// epoch is the ownership epoch of the newest claim (1 or more); node is the
// holder's node ID, "" once released (the epoch is kept, so the next claim
// writes epoch+1, or more if the bucket holds a newer session); address is
// where the holder serves requests, "" when released. These three are
// required. The other fields are optional (records written before them
// parse as if they were 0 or none):
//
//   - seq, only on a released record: the last sequence number of the
//     actor's history when it was released (what the released session made
//     durable; a claim released after a failed open, whose session wrote
//     nothing, keeps its predecessor's). If the newest session at or below
//     the record's epoch does not reach it, that session lost its tail
//     (verify and restore say which sequence numbers are missing); 0 or
//     absent means unknown, as after a crash, where nothing is released.
//   - retention, a Go duration (time.ParseDuration, 0 or more, at most
//     [MaxRetention]): how long the writer keeps covered objects for
//     point-in-time restore, so that a compaction run by anyone else keeps
//     them as long (compact.Options).
//   - followers and quorum, together or not at all, only on a held record:
//     the holder's follower set (package follow), 1 to [MaxFollowers]
//     distinct node IDs other than the holder's, and its quorum, a whole
//     number from 1 to their number. Both absent (the only way to say
//     none: never an empty array) means bucket-only, the holder's commits
//     acknowledged once the bucket holds them. A takeover fences the old
//     epoch at the followers the record names and recovers the tail they
//     hold, so a claim of a held record carries its followers and quorum
//     into the new record unchanged ([Node.Claim]; a claimant that crashes
//     before its takeover completes leaves the next claimant the same set
//     to fence), and only the holder, once it took over, writes a new set,
//     conditional on the version it wrote ([Node.RecordFollowers]). A
//     released record has none: its holder made everything durable in the
//     bucket before it released.
//
// Nothing else, in exactly the encoding [Record.Marshal] writes (fields in
// this order, no spaces, at most [MaxRecordBytes]): a record that does not
// parse is reported as damaged ([ErrBadRecord]), never taken for an absent
// one.
//
// # Proof of ownership
//
// A lease says when a node should stop; it never says that a node may
// acknowledge. A clock that does not count the time its machine was away
// (a VM restored from a snapshot, a hypervisor pause, a live migration)
// keeps a lease valid after a peer judged it dead and claimed its actors,
// and batch uploads are unconditional PUTs, so they land regardless. What
// makes an acknowledgement safe is a read of the bucket: the owner tells a
// caller that a commit is durable in the bucket only once [Node.Confirm],
// begun after the upload holding the commit landed, found own.json still
// naming its claim. One Confirm covers every upload that landed before it
// began, so the owner makes one only when someone waits, and a writer that
// never waits pays nothing (package session, "Acknowledgement").
//
// The proof rests on two properties of the bucket and one rule for
// claimants:
//
//   - a conditional PUT of own.json and a later GET of it are strongly
//     consistent (S3 has been since December 2020; the directory bucket's
//     renames are atomic): a Confirm that reads the claimed version began
//     before any claim's PUT landed;
//   - a listing begun after a PUT completed includes that PUT's key
//     (read-after-write for listings; S3's is strong, and the directory
//     bucket's listing cache serves a listing only with directories read
//     after it began, with no clock involved: bucket/dir_list_cache.go);
//   - a claimant lists the old epoch's log only after its own.json write
//     landed (package session: the claim comes first, then the restore
//     that brings the local copy up to date lists the log).
//
// Together: the upload landed before the Confirm began, the Confirm before
// the claim, and the claim before the claimant's listing, so the claimant
// finds the upload and its history contains every acknowledged commit. An
// upload that lands after the claim is never acknowledged: its Confirm
// reads the claimant's record and fails with ErrFenced. In peer mode the
// followers' epoch check is the proof of what they acknowledge (package
// follow); the lease clock stays on both paths as an early stop.
//
// # Claims on suspicion
//
// Since no acknowledgement rests on a lease, waiting for one to run out
// buys availability, not safety: a claim may replace own.json while its
// holder still runs, and the holder then acknowledges nothing more (its
// proofs read the claimant's record; in peer mode the claimant's takeover
// fences the followers, which then refuse it). So a claimant need not
// wait for the holder's lease once it is confident the holder is gone:
// [ClaimOptions].Suspect, given by a host in peer mode (package quorum,
// Suspicion: this node and a follower of the actor have not heard the
// holder for peer.Config.SuspectAfter), lets [Node.Claim] replace a
// record whose holder's lease is alive. Such a claim replaces one actor's
// own.json and fences nothing else: the holder's lease stays unfenced,
// since its other actors may be well. A false suspicion (a holder cut off
// from its followers but serving callers) costs that actor's availability
// for a moment, never data: the holder's callers are answered 503, and
// retry where the actor is now. Without Suspect, or when it does not
// confirm, a claim waits for the lease as below.
//
// # Follower identity (followers/<follower>.json)
//
// A follower is its store (package tails), named by an ID the store draws
// once; a copied store directory (a restored backup, a cloned machine)
// would be a second store with the same ID, and a promise given by one
// would be counted for the other. So every open of a store is recorded
// ([Identity], [OpenIdentity]):
//
//	{"follower":"9a0b1c2d3e4f5a6b","generation":3,"open":"<32 hex digits>"}
//
// generation is the store's generation after the open (1 or more), open a
// random tag of the open that wrote it. An open of a store at generation g
// writes g+1 conditional on the record it read holding g (or on there
// being none, for g = 0), then the store makes g+1 its own, durably. A
// store whose g is not the record's, or whose write loses, is a copy, or a
// copy of it opened since ([ErrIdentityCopied]): it takes a new ID, in no
// follower set. A restart of the same store finds its own generation and
// stays the same follower. The node serving a store checks the record now
// and then ([CheckIdentity]; host: every second) and stops once another
// open wrote it, and the copy, at its start, fences the leases naming its
// ID ([Node.RetirePredecessors]): a copy started beside a running
// original takes the ID, and the original stops answering within one
// check. Within that window both may answer as the follower: that, and a
// store whose write of g+1 landed before a crash kept it from recording
// g+1 itself (it comes back as a new follower: its promises are lost to
// the owners, who replace it, and never counted twice), are the limits.
//
// # Node lease (nodes/<node>.json)
//
// nodes/<node>.json is a node's lease ([Lease], encoded by [Lease.Marshal],
// decoded by [ParseLease]). Part of the bucket format:
//
//	{"node":"4f1c...","address":"10.0.0.5:8080","heartbeat":42,"fenced":false}
//	{"node":"4f1c...","address":"10.0.0.5:8080","heartbeat":42,"fenced":false,"peer":"10.0.0.5:7070","follower":"9a0b1c2d3e4f5a6b"}
//
// node repeats the key's node ID; address is where the node serves;
// heartbeat counts renewals (the node rewrites it every few seconds with
// If-Match); fenced is set by a peer that judged the node dead, with If-Match
// on the version it judged, so a node that renewed in the meantime is never
// fenced. A fenced lease is never renewed again: the node must stop. These
// four fields are required. peer is optional (leases written before it
// parse as if it were ""): where the node serves the follower transport
// (package peer, [Options].PeerAddress), host:port, absent when it serves
// none (never ""); owners choosing followers find it with
// [Observer.LiveNodes]. follower goes with peer, and only with it: the
// follower ID served there ([Options].Follower, a node ID), its store's,
// which a process restarted on the same store serves again under a new
// node. Such a process fences the leases its predecessors on the store
// left ([Node.RetirePredecessors]), so that one follower has one live
// lease. Anything else is [ErrBadLease].
//
// A missing lease proves nothing about its node: one deleted under a live
// node (by hand, or by a sweep on a skewed clock) is noticed only at the
// node's next renewal. So a claimant waits for a missing lease as for an
// unchanged heartbeat, [Options].Lease + [Options].Grace on its own clock,
// and [SweepLeases] never deletes the lease of a node that an own.json
// names.
package fence
