package peer

import "github.com/framectl/framectl/follow"

// Transport carries follow messages to other nodes, each for an actor (a
// node owns, and follows, many actors over one connection with each peer):
// Node over the network,
// and in tests package peertest's fault-injecting wrapper around any
// Transport. Send never waits for the network: a message is queued, or
// refused with an error that says why (ErrBackpressure, ErrNoRoute,
// ErrClosed, ErrInvalid: among others an actor follow.ValidActor
// refuses). A queued message is delivered at most once, or
// lost with a connection that breaks; messages are delivered in the order
// sent while one connection carries them. The follow protocol resends
// what is not acknowledged, and takes copies and reordering.
type Transport interface {
	Send(to follow.FollowerID, actor string, m follow.Message) error
}

// Handler receives a message, the peer it came from, authenticated, and
// the actor the peer sent it for (1 to follow.MaxActorBytes bytes: what
// to do with one this node does not hold is the caller's).
type Handler func(from follow.FollowerID, actor string, m follow.Message)
