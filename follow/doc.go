// Package follow owns the follower protocol: how an owner's commits become
// durable at q of the actor's n followers before the bucket holds them, and
// how a new owner fences the old epoch at the followers and recovers the
// tail they hold. It is the protocol alone: state machines without I/O
// (Owner, Follower, Takeover), the owner's rule for sending its Appends
// (GroupCommit), their messages (Fence, Promise, Append, Ack, Refuse) and
// the messages' wire encoding. Time reaches them only as an
// argument (Tick), and nothing in them draws a random number, so a schedule
// replays exactly (the simulation in sim_test.go relies on it). Transport
// (package peer), the follower's store on disk (package tails), running
// the state machines on a node (package quorum) and a session's entries
// (vfs, "Acknowledgement by followers") belong elsewhere.
//
// What it must never do: acknowledge a commit that neither the bucket nor q
// followers of the set hold on disk in the owner's epoch; let a follower
// take anything of an epoch older than the newest it was told of; let a
// follower hold entries that are not one chain, or more than its byte
// bound; take back, within one epoch, anything a follower acknowledged; pick
// a tail from fewer than n-q+1 answers, or guess when answers contradict
// each other or the bucket; count a new follower toward q before q
// followers of the new set hold everything that may have been acknowledged.
//
// # Roles
//
// The owner of an actor in epoch E (its claim of own.json, package fence)
// has a set of n followers, other nodes, and a quorum q, 1 <= q <= n, both
// recorded where a takeover finds them (own.json). A follower holds the
// actor's commits past the bucket's durable point, fsynced, and trims them as
// the bucket catches up: bounded by Limits.MaxTailBytes, never the database.
// A log is a point (seq and chain value: Point) and entries chained from it
// (Entry: seq, chain value before and after, body); the chain value is the
// rolling database checksum of package frames, which the bucket's durable
// point carries too.
//
// # The owner
//
// Owner.Append takes the next commit and sends it to every follower
// (Append messages, pipelined, or one in flight through GroupCommit; what
// is not acknowledged within Retransmit is sent again from the last
// acknowledged point). A follower acknowledges (Ack) the end of the log it
// holds. Owner.Acked is the highest seq held by q followers of the set in
// epoch E, or held by the bucket (Owner.BucketDurable), whichever is
// higher: that is what Durable may return on. A follower that refuses as full or broken is failed: the owner
// stops sending to it (Owner.Followers), to be replaced. Once a follower
// says it was told of a newer epoch, the owner is superseded: it
// acknowledges nothing more and Append fails with a *SupersededError. The
// owner holds at most Limits.MaxTailBytes past the bucket's durable point
// and refuses commits past it (ErrBackpressure) until the bucket catches
// up.
//
// # Group commit
//
// The owner queues an Append to every follower for every commit, and a
// follower takes one message at a time and fsyncs before it answers: with
// many writers the Appends wait behind each other's fsyncs, one per commit
// per follower (package quorum's BenchmarkDurable, 16 writers: 1,296
// commits/s against the bucket's 4,228; BENCHMARKS.md). GroupCommit,
// between Owner.Outbox and the transport, keeps one Append in flight to
// each follower: those the owner queues meanwhile are merged into one,
// which goes when the answer (Ack or Refuse) comes, or once Retransmit
// passed without one. The follower then fsyncs once per round trip (4,988
// commits/s). It changes none of the protocol's rules: the merged Append
// is one the owner could have sent itself (the first one's Prev, every
// entry in order, the last one's durable point), the owner counts what it
// queued as sent and sends again what is not acknowledged, as it does for
// a lost message, and a follower checks a merged Append as any other. An
// Append that does not extend the one held (a retransmission from an
// earlier point) replaces it, and a reset, which carries everything past
// the durable point, goes at once and drops it. The simulation runs each
// of its configurations again with the owners sending through it.
//
// # The follower
//
// A follower keeps (State): Promised, the newest epoch it was told of;
// LogEpoch, the epoch whose owner wrote its log; and the log. It refuses
// every message of an epoch older than Promised (RefuseStale, naming the
// newer one), and entries that are not chained from their message's point
// (RefuseBroken). Only a Fence or a reset raises Promised: an Append of a
// newer epoch without one is refused (RefuseNeedReset) and changes nothing,
// as if it were lost, so that whoever checks a raise (package quorum reads
// own.json first) checks those two kinds. The first message of a new owner is a reset: Prev is the
// owner's durable point, Entries everything past it, and the follower
// replaces its log with it whole. After that, Appends of that epoch extend
// the log at its end; a copy, a late retransmission or a reset of the same
// epoch never shortens it, and one that starts past its end is refused
// with the end to send from (RefuseGap). Every Append carries the owner's
// durable point, and the follower drops what it covers before it checks its
// bound; past the bound it refuses (RefuseFull). The caller fsyncs State
// before it sends a reply.
//
// # Takeover
//
// A new owner of epoch E first claims own.json (which stops the old owner's
// bucket path: package fence), reads the bucket's durable point B (the end
// of what a restore gives, and its chain value), and runs a Takeover: a
// Fence of E to every follower of the set own.json records, re-sent every
// Retransmit to those that have not answered. A follower answers only if E
// is not older than its promise; it promises E (refusing every older epoch
// from now on) and answers with its log epoch and log (Promise). Once n-q+1
// followers of the set promised, the takeover picks the tail:
//
//  1. a log that ends at or before B holds nothing the bucket lacks: passed
//     over;
//  2. a log that reaches past B but does not hold B with the bucket's chain
//     value is on a branch the bucket superseded (its epoch's owner stopped
//     before the owner that wrote the bucket past where they part): passed
//     over. A log that starts past B is a contradiction (ErrDiverged);
//  3. of the rest, the log of the newest log epoch, and of those the
//     longest (two logs of one epoch that disagree are ErrDiverged); its
//     entries past B are the tail.
//
// The new owner's state is the bucket through B, then the tail (Recovery,
// NewOwner). It sends every follower a reset with it, and acknowledges
// nothing of its own before q followers of the set hold that tail in epoch
// E.
//
// Why the tail holds every acknowledged commit. Say an older epoch X
// acknowledged seq s by quorum: q followers of its set held X's log through
// s and said so before they promised anything newer (after that they refuse
// X). Any q and any n-q+1 followers of one set share one, since q + (n-q+1)
// > n: call it f. What f answers is the log of an epoch A >= X (a log epoch
// only grows): X's own log, which still holds s (within an epoch a log only
// grows at its end, and loses at its start only what the bucket holds), or
// the log of a newer owner, which holds s because it starts with everything
// that owner recovered (by the same argument, one epoch earlier) and a reset
// carries all of it at once. f's log holds B with the bucket's chain value,
// since the bucket and every owner's log share their history through s, so
// step 2 does not pass it over. The log step 3 picks has a log epoch of A or
// newer: if A, the longest of one owner's chain, which holds s; if newer,
// one that starts with what its owner recovered, s included. A commit
// acknowledged by the bucket is at or before B. (Entries are carried, never
// rewritten: "holds s" means holds the very commit.) The simulation breaks
// each of these steps on purpose and fails (sim_faults_test.go).
//
// # What an acknowledged commit survives
//
// The exact rule, for n followers and quorum q. An acknowledged commit is in
// the state every later takeover recovers, at its seq, after the same
// commits, once, through the loss of the owner and of the stores of any q-1
// followers of the set, provided the takeover hears from n-q+1 followers of
// the set own.json recorded. Of the q followers that hold it at most q-1 are
// lost, and any n-q+1 that answer include one that holds it. A follower is
// its store (FollowerID): one that crashes and restarts on its store loses
// nothing, having fsynced before it acknowledged; it is only unreachable
// for a while.
//
// Availability is the other half. New commits are acknowledged while q
// followers of the set are reachable, so with up to n-q unreachable or lost
// (or with the bucket alone, which is slower); a takeover completes while
// n-q+1 are, so with up to q-1 unreachable or lost. With q = n/2+1 (integer
// division) and n odd the two bounds are one: (n-1)/2, one follower for n=3, q=2,
// two for n=5, q=3. A larger q keeps more commits through more losses but
// stops writes sooner (n=5, q=4: commits survive 3 lost stores, writes stop
// at 2); a smaller q keeps writes going and needs more answers to take over
// (n=4, q=2: commits survive 1 lost store, a takeover needs 3 answers). The
// simulation runs n=3, q=2 and n=5, q=3.
//
// Outside the rule: the bucket's own durability; a superseded owner's writes
// to the bucket, which package fence's lease guard and restore's lineage
// keep out of every restore; followers that lie (the transport
// authenticates peers, and a follower is trusted to keep what it
// acknowledged).
//
// # When too few followers answer
//
// The takeover waits at most TakeoverConfig.Wait (DefaultWait) for n-q+1
// answers, re-sending its fences, then fails with a *TooFewAnswersError
// (ErrTooFewAnswers) naming the followers that did answer. It never picks a
// tail from fewer: the ones missing may be the only holders of an
// acknowledged commit (the simulation loses commits when it does). The
// actor stays unavailable rather than lose a commit; the caller retries,
// with the same epoch (fences and promises are idempotent) or a new claim,
// and reports the error. Every follower that answered has promised E
// meanwhile and refuses the old owner from then on; once n-q+1 have, the
// old owner can acknowledge nothing past what they held when they did.
//
// # Replacing a follower
//
// A follower lost, failed (full, broken) or gone is replaced by changing
// the set (Owner.ChangeSet). The new followers, new stores that hold
// nothing of epoch E, get a reset with everything past the bucket's durable
// point, then every commit. They count toward q only in three steps: while
// they catch up, the set own.json records alone acknowledges; once q
// followers of the new set hold everything that may have been acknowledged
// (what this owner acknowledged and all it recovered), the change is ready
// (Owner.Pending) and the caller records the new set in own.json with a
// write conditional on epoch E (which fails once a newer owner claimed);
// from ready until the owner hears it landed (Owner.Recorded) a commit
// counts only once q followers of each set hold it, since a takeover may
// read either. A change can be cancelled before it is ready
// (Owner.Cancel).
//
// # Wire format
//
// Every message is one frame of bytes, written by AppendMessage and read by
// DecodeMessage; the transport delimits frames. Integers are little-endian.
//
//	+---------+------+------------------------------+----------+
//	| version | kind | fields of the kind           | CRC-32C  |
//	| 1 byte  | 1    | (below)                      | 4 bytes  |
//	+---------+------+------------------------------+----------+
//	version 1, or 2 for a Fence or Append that names its actor; the CRC
//	(Castagnoli) covers every byte before it.
//
//	kind 1 Fence    epoch u64 [| actor]
//	kind 2 Promise  epoch u64 | log epoch u64 | base point | entries
//	kind 3 Append   epoch u64 | flags u8 (bit 0 reset) | prev point | durable point [| actor] | entries
//	kind 4 Ack      epoch u64 | end point
//	kind 5 Refuse   epoch u64 | reason u8 | newest epoch u64 | end point
//
//	point   = seq u64 | chain u64
//	entries = count u32 | count x ( seq u64 | before u64 | after u64 | body length u32 | body )
//	actor   = length u16 (1..MaxBucketActorBytes) | bytes; present in version 2 only
//
// Version 2 added the actor (Fence.Actor) without changing version 1, which
// package tails keeps on disk as its records: a store written before reads
// as it was, and a message without an actor still encodes as version 1.
//
// The decoder accepts only what the encoder writes: version 1 or (Fence and
// Append) 2, a known kind and reason, flags other than bit 0 clear, an actor
// of 1 or more bytes in version 2, epoch 1 or more, a log epoch not
// past its promise, a stale refusal naming a newer epoch, entries chained
// from their point, exactly the bytes the fields take, then the CRC. It
// checks the message against Limits.MaxMessageBytes (a whole tail and the
// fixed fields) before copying it, every count against the bytes left
// (an entry takes 28 bytes at least) before allocating the list, and every
// body length before slicing the body. A message that fails is a
// *MessageError naming the peer and the offset, matching exactly one of
// frames.ErrCorrupt, frames.ErrTruncated, frames.ErrTooLarge and
// frames.ErrUnknownKind. Each field has one encoding, so a message decodes
// only from the bytes its encoding gives (fuzz.FuzzFollowMessage checks it).
//
// Why this and not Cap'n Proto, which the bucket's formats use: the messages
// are flat (integers and a list of byte strings), so a schema buys no
// evolution that a version byte does not; the decoder's every bound is
// visible in a hundred lines, with no traversal or depth limits to set; one
// encoding per message makes "accepts only what the encoder writes" exact;
// and capnp/ is shared with the bucket's formats, which these messages need
// not move with. The transport may still be Cap'n Proto RPC or HTTP/2
// carrying these frames as bytes.
package follow
