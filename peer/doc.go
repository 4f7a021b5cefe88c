// Package peer owns the connections between nodes that carry the messages
// of package follow: authentication with the cluster key, framing, TLS when
// the operator gives certificates, reconnects and back-pressure.
//
// What it must never do: interpret a message beyond decoding it with
// follow's bounds (follow.DecodeMessage) and reading the actor it is for;
// deliver a message from a peer
// that did not prove it holds the cluster key, or one altered, replayed,
// reordered or cut on the wire, or one past the message bound; allocate
// what a length field claims before the bytes arrived; block a caller on
// the network (Send queues or refuses, at once). What a message means,
// and what to resend when one is lost, is follow's; which node an actor's
// followers are and where they listen, package quorum's; the store a
// follower fsyncs, package tails's.
//
// # Plain TCP, not Cap'n Proto RPC or HTTP/2
//
// A connection is a TCP stream (TLS when Config.TLS is set) of
// length-prefixed frames, each an actor's name and a follow message under
// a MAC, after a handshake of three messages. One connection carries the
// messages of every actor two nodes share: a node owns many actors and
// follows many, and each frame names the one its message is for. The two carriers already at hand were
// weighed and not taken:
//
//   - Cap'n Proto RPC (capnproto.org/go/capnp/v3, in go.mod) is
//     capability RPC with promise pipelining; follow's messages are flat
//     byte strings sent one way, which it would wrap in calls. It would add
//     a second decoder of untrusted bytes in front of follow's (the stream
//     transport of the pinned v3.1.0-alpha.2 builds its capnp.Decoder with
//     the library's default 64 MiB limit, not the cluster's), it
//     authenticates nobody, and its flow control is per capability, not
//     per peer. follow's doc says why its messages are not Cap'n Proto
//     either.
//   - HTTP/2 from net/http: since Go 1.24 http.Protocols also speaks it
//     without TLS (SetUnencryptedHTTP2), and one long request whose body
//     and response stream both ways could carry the frames. But it would
//     carry them only: HTTP/2 authenticates no one and, without TLS,
//     checks no byte, so the handshake and the MACs below would be the
//     same; around them it adds HPACK, stream and connection windows and
//     an http.Server whose timeouts must be kept off long streams, to
//     buy multiplexing, which one connection per pair of nodes does not
//     need. Its one gain, sharing the port of a node's HTTP server, stays
//     open: Client and Server take any net.Conn, so an HTTP/2 stream
//     wrapped as one would carry the same handshake and frames.
//
// With plain streams every byte a peer sends passes through two readers
// of a hundred lines (readHello, Conn.Receive), both fuzzed
// (fuzz.FuzzPeerHandshake, fuzz.FuzzPeerFrames, and fuzz.FuzzPeerPayload
// behind the MAC), before follow's.
//
// # Handshake
//
// The dialer speaks first; each side sends a hello, the listener its proof
// with it, the dialer its proof last, and frames follow both ways:
//
//	dialer                                    listener
//	  | hello (role 1)                             |
//	  |------------------------------------------->|
//	  |                  hello (role 2) | proof(L) |
//	  |<-------------------------------------------|
//	  | proof(D)                                   |
//	  |------------------------------------------->|
//	  | frames                            frames   |
//	  |<------------------------------------------>|
//
//	hello:
//	+---------+---------+------+---------+-----------+---------+
//	| magic   | version | role | nonce   | ID length | ID      |
//	| 8 bytes | 1       | 1    | 32      | 1         | 1..255  |
//	+---------+---------+------+---------+-----------+---------+
//	magic "fctlpeer"; version 3; role 1 dialer, 2 listener; nonce: fresh
//	random bytes; ID: the sender's node ID, UTF-8 without control
//	characters. proof: 32 bytes.
//
// The keys (HKDF and HMAC with SHA-256, RFC 5869 and 2104):
//
//	T        = SHA-256("framectl peer handshake v2" | len(B) as 1 byte | B | dialer's hello | listener's hello)
//	           B: 32 bytes of TLS keying material (exporter label "EXPORTER-framectl-peer") under TLS, empty without
//	P        = HKDF(cluster key, salt "framectl peer v2", info "handshake proof")
//	proof(L) = HMAC(P, "listener" | T)
//	proof(D) = HMAC(P, "dialer" | T)
//	K(D->L)  = HKDF(cluster key, salt T, info "frames dialer to listener")
//	K(L->D)  = HKDF(cluster key, salt T, info "frames listener to dialer")
//
// Each side checks the other's proof (in constant time) before it sends
// anything more: the dialer sends its own only once the listener proved
// the key and that it is the node dialed (ErrWrongPeer otherwise: the
// address moved, or the node there restarted with another ID). Each proof
// covers the other side's fresh nonce, so a recorded handshake replayed
// fails (ErrAuth); the labels differ, so a proof cannot be reflected; T
// holds both IDs, so a peer's claimed ID is what the key proved. The
// listener proves first, so anyone who can connect to a node (or watch a
// handshake on plain TCP) gets a proof to test guesses of the key against
// offline: that is why the key is 32 random bytes at least, never a
// password (MinKeyBytes). The reader accepts only what the writer writes:
// the magic and version (frames.ErrUnknownKind otherwise: not this
// protocol, or another version of it), the role expected, an ID of 1 to 255 bytes of UTF-8 without
// control characters (frames.ErrCorrupt), reading 298 bytes of a hello
// at most. HandshakeTimeout bounds the handshake whole, and a node holds
// at most 64 connections in handshake.
//
// # Frames
//
//	+---------+------------+-----------------------------------+----------+
//	| length  | header MAC | payload                           | MAC      |
//	| 4 bytes | 16         | length bytes                      | 32       |
//	+---------+------------+-----------------------------------+----------+
//	length:     little-endian, at most 1 + follow.MaxActorBytes + follow.Limits.MaxMessageBytes
//	header MAC: HMAC(K(direction), 1 | seq | length), its first 16 bytes
//	MAC:        HMAC(K(direction), 2 | seq | length | payload)
//	seq:        the frame's number in its direction on this connection,
//	            from 0, as 8 bytes little-endian; not sent
//
//	payload:
//	+--------------+----------------------+----------------------------+
//	| actor length | actor                | message                    |
//	| 1 byte       | actor length bytes   | the rest: one follow       |
//	|              | (1..MaxActorBytes)   | message (AppendMessage)    |
//	+--------------+----------------------+----------------------------+
//	actor: the name of the actor the message is for, any bytes
//	       (follow.ValidActor)
//
//	or, with 0 where the actor's length would be, a control frame:
//	+------+------+--------------------------------------------------+
//	| 0    | kind | body                                             |
//	| 1    | 1    | by kind, exactly:                                |
//	+------+------+--------------------------------------------------+
//	kind 1 heartbeat: nothing
//	kind 2 question:  query ID (8) | subject length (1) | subject (1..255)
//	kind 3 answer:    query ID (8) | subject length (1) | subject (1..255) |
//	                  known (1: 0 or 1) | silence in ms (4, saturating)
//	subject: a node ID, as a hello's
//
// Receive checks the header MAC and then the length against the frame
// bound (frames.ErrTooLarge) before it reads the payload, so a length
// altered on the wire fails at once, not once the bytes it claims have
// come. It reads the payload into a buffer that grows with the bytes that
// arrive (16 KiB first, then doubling), never to the length at once, then
// checks the MAC, then the actor length: 0 or past follow.MaxActorBytes is
// frames.ErrCorrupt, past the payload (or no byte for it) is
// frames.ErrTruncated, both before the name is copied; then it decodes
// the rest with follow.DecodeMessage (its errors, a *follow.MessageError
// naming the peer, are in the chain). A control frame has exactly the
// length its kind draws: any other, an unknown kind, a subject that is
// not a node ID or a known byte past 1 is frames.ErrCorrupt (frames.ErrTruncated
// when it stops short), at most 271 bytes read. Send refuses an actor
// follow.ValidActor refuses (ErrInvalid). The frame layout is part of
// version 3 of the handshake: a node of version 1, whose frames carry no
// actor, or of version 2, which knows no control frame, is refused in its
// hello, so a cluster moves to version 3 with all its nodes at once (until
// then, an owner whose followers cannot be reached acknowledges by the
// bucket). Integers of the handshake and frames
// are little-endian like follow's. The constants marked as part of the
// wire format in handshake.go, conn.go and key.go change only with a new
// version (helloVersion, and new key-schedule labels); testdata/golden
// pins their bytes and TestWireLayout recomputes them from this drawing.
//
// # What is authenticated
//
// Everything after the handshake: a frame's length, payload and its place
// in the stream (the implicit seq), under a key of that connection and
// direction. So a frame from another connection or the other direction, a
// copy, a frame out of order and one with a bit changed all fail a MAC
// (ErrAuth); one cut short runs into the end of the stream
// (frames.ErrTruncated).
// A stream cut exactly between frames looks like the peer closing: what
// did not arrive is lost, as with any broken connection. Without TLS the
// payload is readable on the wire (commits' pages): authenticated, not
// secret. With TLS it is both, and T binds the handshake to the TLS
// connection, so one relayed between two TLS connections (by someone who
// holds a certificate but not the cluster key) fails.
//
// # What a broken frame does
//
// It ends the connection: the stream cannot be trusted past it. Nothing of
// the frame is delivered, nor anything after it on that connection; the
// node closes it, counts and logs the *ConnError (Stats.Failed,
// Stats.LastError) and dials again if it has something to send. The same
// holds for a frame whose bytes authenticate but do not start with an
// actor's name or are not a follow message after it (a peer's bug, not
// the wire's).
//
// # Delivery and back-pressure
//
// A message Send took is delivered at most once, or lost: in flight when
// its connection broke, or left for a peer the node can no longer reach
// (Stats.Lost). Never twice, never altered, never from anyone but its
// sender; in the order sent while one connection carries the messages
// (after a reconnect, what the old connection still held may come after
// the first of the new). The follow protocol is built for that: the owner
// resends everything unacknowledged every Retransmit, and follow's
// simulation drops, copies and reorders messages on purpose
// (peertest adds those faults back, for tests over this transport).
//
// Each peer has one queue, for all its actors, bounded by
// Config.MaxQueueBytes of frames, each counted whole: header, actor,
// message and MAC (a single larger one is taken into an empty queue). Send never
// waits: it queues, or refuses with ErrBackpressure when the queue is
// full, so one slow follower never stalls an owner's sends to the others,
// and what it refused is resent by the protocol like anything lost. The
// queue drains as fast as the peer reads: the messages of a connection
// wait for its Handler in a queue of their own (dispatch.go), and once
// Config.MaxQueueBytes of them wait the connection is not read until the
// Handler catches up: TCP's window closes, and the sender's queue fills.
// A write that makes no progress for StallTimeout (30 s)
// ends the connection: the peer stopped reading or vanished with data in
// flight. A connection to a vanished host is found by its silence
// (Failure detection), and by TCP keepalive.
//
// # Failure detection
//
// A node beats on every connection it has, every Config.Heartbeat (100 ms),
// when the connection carried nothing else meanwhile: a control frame of
// 54 bytes, written beside the peer's queue, never behind it (a
// connection busy writing a frame needs no beat). Every frame read, of any
// kind, is hearing from its peer, and the reader never waits for the
// Handler while less than MaxQueueBytes of messages wait for it, so
// neither end's fsyncs delay the beats. Node.Silence says how long a
// node has not heard from a peer it wanted to hear from (one it had a
// connection with, or Node.Watch dialed), and suspects it past
// Config.SuspectAfter (500 ms): a peer killed (its connections close, its
// address refuses) and one stopped or cut off (its beats stop) look the
// same. A peer heard again after a silence stays suspected for
// Config.TrustAfter (5 s), so a flapping link keeps it suspected rather
// than coming and going. While a connection's reader holds a message the
// Handler has no room for, its peer counts as heard: that silence is this
// node's own.
//
// Node.Ask puts the question to another node: it sends a question naming
// the subject and a random query ID, and the observer answers from its
// own Silence (it reads and answers on its reading goroutine, so a busy
// Handler does not delay it). An answer is taken only from the node asked,
// for the subject and query ID asked. What a claimant makes of the
// answers is package quorum's (Suspicion): this package only reports
// what each node heard.
//
// # Connections and reconnects
//
// Either side's connection carries messages both ways. A node dials a peer
// when it has something to send and no connection with it, at the address
// SetAddr gave; a peer with no address is reached over the connections it
// opened (a follower answers its owner on the owner's connection, with no
// address for it). While a peer is unreachable its messages wait in the
// queue and the node redials after 50 ms, doubling to 5 s, jittered; a
// frame that goes resets the backoff. Connections opened both ways are both
// read; the first carries the queue.
//
// # TLS
//
// Config.TLS set (certificates, and the roots to check the peer's),
// every connection is TLS 1.3 or newer: the listener's config as given, a
// dialer's with ServerName set to the host of the peer's address when
// empty. The cluster key is checked either way: TLS says which host, the
// key says which cluster, and the node ID which node. Ask for client
// certificates (ClientAuth) to have TLS check the dialer too.
package peer
