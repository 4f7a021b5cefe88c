package peer

import "github.com/framectl/framectl/follow"

// Transport carries follow messages to other nodes: Node over the network,
// and in tests package peertest's fault-injecting wrapper around any
// Transport. Send never waits for the network: a message is queued, or
// refused with an error that says why (ErrBackpressure, ErrNoRoute,
// ErrClosed, ErrInvalid). A queued message is delivered at most once, or
// lost with a connection that breaks; messages are delivered in the order
// sent while one connection carries them. The follow protocol resends
// what is not acknowledged, and takes copies and reordering.
type Transport interface {
	Send(to follow.NodeID, m follow.Message) error
}

// Handler receives a message and the peer it came from, authenticated.
type Handler func(from follow.NodeID, m follow.Message)
