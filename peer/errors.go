package peer

import (
	"errors"
	"fmt"

	"github.com/framectl/framectl/follow"
)

// Errors callers decide on, for errors.Is. A broken connection or handshake
// is a *ConnError, which matches one of them or one of package frames'
// sentinels (see ConnError).
var (
	// ErrWeakKey: the cluster key is shorter than MinKeyBytes, or is one
	// byte value repeated (a zeroed buffer, not a key).
	ErrWeakKey = errors.New("peer: cluster key too weak")
	// ErrAuth: a peer failed to prove that it holds the cluster key (its
	// handshake proof does not verify: another key, or a handshake altered
	// or replayed), or a frame's MAC does not verify (altered, replayed,
	// reordered, or from another connection). Nothing it carried is
	// delivered.
	ErrAuth = errors.New("peer: authentication failed")
	// ErrWrongPeer: the node at a peer's address proved, with the key, that
	// it is another node (the address moved, or the node restarted with
	// another ID), or a node reached itself.
	ErrWrongPeer = errors.New("peer: the node reached is not the one dialed")
	// ErrBackpressure: the message would take the peer's queue past
	// Config.MaxQueueBytes; it was not queued. Send it again later (the follow protocol
	// resends everything unacknowledged on its own).
	ErrBackpressure = errors.New("peer: queue to the peer is full")
	// ErrNoRoute: no connection with the peer and no address for it
	// (Node.SetAddr); the message was not queued.
	ErrNoRoute = errors.New("peer: no connection with the peer and no address for it")
	// ErrClosed: the node is closed.
	ErrClosed = errors.New("peer: closed")
	// ErrInvalid: a caller broke a rule of the API (a bad Config, a node ID
	// out of bounds, a message to itself, an actor name follow.ValidActor
	// refuses, a message follow refuses to encode).
	ErrInvalid = errors.New("peer: invalid")
)

// ConnError is why a connection, or its handshake, ended. It matches
// exactly one of: ErrAuth, ErrWrongPeer, frames.ErrCorrupt (a malformed
// handshake, or a frame whose authenticated bytes are not an actor's name
// and a follow message: an actor length of 0 or past follow.MaxActorBytes,
// or a message follow refuses, then with a *follow.MessageError in the
// chain), frames.ErrTruncated (the stream ended inside a handshake message
// or a frame, or a frame's actor runs past its payload),
// frames.ErrTooLarge (a frame longer than the frame bound, refused before
// it is read), frames.ErrUnknownKind (not this protocol, or another
// version of it); or it wraps the network's own error (a timeout matches
// os.ErrDeadlineExceeded, a cancelled handshake the context's error).
type ConnError struct {
	Op   string            // "dial", "handshake", "receive" or "send"
	Addr string            // the remote address
	Peer follow.FollowerID // the peer, once known: the one dialed, or the one the handshake authenticated; "" before
	Err  error
}

func (e *ConnError) Error() string {
	peer := string(e.Peer)
	if peer == "" {
		peer = "unauthenticated peer"
	}
	return fmt.Sprintf("peer: %s %s at %s: %v", e.Op, peer, e.Addr, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }
