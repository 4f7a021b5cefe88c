// Package logattr owns the keys of the log attributes framectl's packages
// share, and the values of Subsystem: one place to see what a log line's
// attribute means and what its value holds. The strings are what operators
// search and filter logs by, so they never change; a new key is added here
// once a second package logs it.
//
// It never logs, and holds no figure of one operation's own ("deleted",
// "applied", "chunksKept"): those keys stay at the call that logs them.
package logattr

// Keys. Each says what its value holds and the value's type.
const (
	// Subsystem is the package a logger belongs to, set once with
	// slog.Logger.With: a string, one of the Subsystem values below.
	Subsystem = "subsystem"

	// Actor is the actor a line concerns, a string as the logging
	// package names it: its key prefix do/<namespace>/<actor>/
	// (frames.Actor.Prefix: packages compact and restore), its hex key
	// (frames.ActorKey, with Namespace beside it: package host and the
	// replicator) or its follower name (quorum.ActorName: packages
	// quorum and tails).
	Actor = "actor"
	// Namespace is the namespace of Actor as the host's caller names it
	// (not its NamespaceID): a string.
	Namespace = "namespace"
	// Epoch is an ownership epoch, a frames.Epoch: the session a line
	// concerns.
	Epoch = "epoch"
	// Seq is a sequence number, a frames.Seq: where in the log.
	Seq = "seq"
	// Key is an object's key in the bucket, a string.
	Key = "key"

	// Err is what failed, an error.
	Err = "err"
	// Why is the reason for what a line reports (an actor dropped or
	// closed, a step skipped, a record dropped): a string, or an error
	// when the reason is one (package tails).
	Why = "why"
	// Attempt is which try this is, an int from 1.
	Attempt = "attempt"
	// Duration is how long something took, a time.Duration.
	Duration = "duration"

	// Node is a node's ID (fence.Node.ID), a string or a
	// follow.FollowerID: the node logging, set with With, or the node a
	// line is about.
	Node = "node"
	// Holder is the node that holds an actor, its ID: a string.
	Holder = "holder"
	// Address is where a node serves its callers (host:port), a string.
	Address = "address"
	// Peer is the node at the other end of a follower connection, a
	// string (its follow.FollowerID).
	Peer = "peer"
	// Addr is the network address of a follower connection's other end
	// (host:port), a string.
	Addr = "addr"
	// Lost is how many messages were dropped, an int.
	Lost = "lost"
	// Follower is one follower's ID, a follow.FollowerID or a string.
	Follower = "follower"
	// Followers is an actor's follower set, a []string or a
	// []follow.FollowerID.
	Followers = "followers"
	// Quorum is how many acknowledgements a commit needs, an int.
	Quorum = "quorum"

	// File is the path of one of package tails' files, a string.
	File = "file"
	// Path is the path of a local file (a database, a scratch copy), a
	// string.
	Path = "path"
)

// Values of Subsystem: which package logged.
const (
	SubsystemCompact    = "compact"
	SubsystemFence      = "fence"
	SubsystemHost       = "host"
	SubsystemPeer       = "peer"
	SubsystemQuorum     = "quorum"
	SubsystemReplicator = "replicator" // package session (its replicator and state file)
	SubsystemRestore    = "restore"
	SubsystemTails      = "tails"
)
