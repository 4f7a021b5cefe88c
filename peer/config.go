package peer

import (
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/framectl/framectl/follow"
)

// Defaults of Config.
const (
	// DefaultMaxQueueBytes is Config.MaxQueueBytes when zero: more than a
	// second of commits at 10 MB/s, and what is refused past it the follow
	// protocol resends.
	DefaultMaxQueueBytes = 16 << 20
	// DefaultHandshakeTimeout is Config.HandshakeTimeout when zero. It also
	// bounds a dial, and how long an unauthenticated connection is held.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultStallTimeout is Config.StallTimeout when zero.
	DefaultStallTimeout = 30 * time.Second
	// DefaultHeartbeat is Config.Heartbeat when zero: ten beats a second
	// on each connection, 54 bytes each.
	DefaultHeartbeat = 100 * time.Millisecond
	// DefaultSuspectAfter is Config.SuspectAfter when zero: five beats
	// missed. On one network a beat takes well under a millisecond; a
	// Go program's pauses (GC, scheduling on 2 busy cores) are
	// milliseconds. Five beats is the least that kept the tests of a
	// loaded machine free of false suspicions, and a false suspicion
	// costs availability, never data.
	DefaultSuspectAfter = 500 * time.Millisecond
	// DefaultTrustAfter is Config.TrustAfter when zero.
	DefaultTrustAfter = 5 * time.Second
)

// Config is one node's side of the transport. Client and Server use ID,
// Key, Limits, HandshakeTimeout, StallTimeout and Rand (TLS is the
// net.Conn they are given); NewNode all of it.
type Config struct {
	// ID is this node's name, as its peers send to it: 1 to 255 bytes of
	// UTF-8 without control characters. The handshake proves it.
	ID follow.FollowerID
	// Key is the cluster key every node shares: MinKeyBytes random bytes
	// at least (ErrWeakKey otherwise).
	Key []byte
	// Limits must be the cluster's: a frame longer than
	// Limits.MaxMessageBytes and the longest actor name is refused before
	// it is read.
	Limits follow.Limits
	// TLS, when the operator gives certificates, carries every connection
	// over TLS 1.3 (or newer): Node.Serve uses it as the server's config,
	// a dial as the client's (ServerName, when empty, is the host of the
	// peer's address). nil: plain TCP, authenticated but readable on the
	// wire. The handshake authenticates the cluster key either way.
	TLS *tls.Config
	// Handler receives every message that arrives, authenticated and
	// decoded, with the actor it is for. Node calls it on a goroutine of
	// the connection the message came on, beside the one reading it: one
	// at a time per connection, in the order received, concurrently
	// across connections. While it runs the connection goes on being
	// read (heartbeats and questions are answered on time) until
	// MaxQueueBytes of messages wait for it; then the connection reads
	// nothing more, which is the back-pressure a sender sees. It must
	// return (Close waits for it). It may call Send. Required by NewNode.
	Handler Handler
	// MaxQueueBytes bounds the messages queued for one peer, in the bytes
	// of their frames, header, actor and MAC included (ErrBackpressure
	// past it); a single message larger than that is taken when nothing
	// is queued. Default DefaultMaxQueueBytes.
	MaxQueueBytes int64
	// HandshakeTimeout bounds a dial and a handshake. Default
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// StallTimeout: a write that makes no progress this long (the peer
	// stopped reading, or vanished with data in flight) ends the
	// connection. Negative: never. Default DefaultStallTimeout.
	StallTimeout time.Duration
	// Heartbeat is how often a node beats on a connection that carried
	// nothing meanwhile (doc.go, "Failure detection"). Default
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// SuspectAfter: a peer this node wants to hear from (Node.Watch, or
	// any connection it had) and did not hear from for this long is
	// suspected (Node.Silence). At least twice Heartbeat. Default
	// DefaultSuspectAfter.
	SuspectAfter time.Duration
	// TrustAfter: a suspected peer heard again stays suspected this long
	// (hysteresis: a flapping link does not make it come and go).
	// Default DefaultTrustAfter.
	TrustAfter time.Duration
	// Logger receives connections made and broken; nil discards.
	Logger *slog.Logger
	// Rand draws the handshake's nonces; nil is crypto/rand. Only tests
	// set it, to replay a handshake byte for byte.
	Rand io.Reader
}

// settings is a Config checked, with its defaults and keys.
type settings struct {
	id               follow.FollowerID
	keys             *schedule
	lim              follow.Limits
	maxPayload       int64 // a frame's: an actor and a message of lim
	tls              *tls.Config
	handler          Handler
	maxQueue         int64
	handshakeTimeout time.Duration
	stall            time.Duration
	heartbeat        time.Duration
	suspectAfter     time.Duration
	trustAfter       time.Duration
	log              *slog.Logger
	rand             io.Reader
}

func (c Config) settings() (*settings, error) {
	if err := checkID(c.ID); err != nil {
		return nil, fmt.Errorf("%w: Config.ID: %v", ErrInvalid, err)
	}
	keys, err := newSchedule(c.Key)
	if err != nil {
		return nil, err
	}
	if c.Limits.MaxTailBytes < 0 {
		return nil, fmt.Errorf("%w: Limits.MaxTailBytes %d", ErrInvalid, c.Limits.MaxTailBytes)
	}
	// The frame length is 32 bits.
	if c.Limits.MaxMessageBytes() > math.MaxUint32-maxActorPrefix {
		return nil, fmt.Errorf("%w: a message bound of %d bytes, past a frame's 32-bit length with an actor", ErrInvalid, c.Limits.MaxMessageBytes())
	}
	if c.MaxQueueBytes < 0 {
		return nil, fmt.Errorf("%w: MaxQueueBytes %d", ErrInvalid, c.MaxQueueBytes)
	}
	s := &settings{
		id: c.ID, keys: keys, lim: c.Limits, maxPayload: maxActorPrefix + c.Limits.MaxMessageBytes(), handler: c.Handler,
		maxQueue: c.MaxQueueBytes, handshakeTimeout: c.HandshakeTimeout, stall: c.StallTimeout, log: c.Logger, rand: c.Rand,
		heartbeat: c.Heartbeat, suspectAfter: c.SuspectAfter, trustAfter: c.TrustAfter,
	}
	if s.heartbeat <= 0 {
		s.heartbeat = DefaultHeartbeat
	}
	if s.suspectAfter <= 0 {
		s.suspectAfter = DefaultSuspectAfter
	}
	if s.suspectAfter < 2*s.heartbeat {
		return nil, fmt.Errorf("%w: SuspectAfter %v is less than two heartbeats of %v", ErrInvalid, s.suspectAfter, s.heartbeat)
	}
	if s.trustAfter <= 0 {
		s.trustAfter = DefaultTrustAfter
	}
	if c.TLS != nil {
		s.tls = c.TLS.Clone()
		if s.tls.MinVersion < tls.VersionTLS13 {
			// The transcript binds TLS 1.3's exporter (tlsBinding); every
			// node runs this code, so nothing older need be spoken.
			s.tls.MinVersion = tls.VersionTLS13
		}
	}
	if s.maxQueue == 0 {
		s.maxQueue = DefaultMaxQueueBytes
	}
	if s.handshakeTimeout <= 0 {
		s.handshakeTimeout = DefaultHandshakeTimeout
	}
	switch {
	case s.stall == 0:
		s.stall = DefaultStallTimeout
	case s.stall < 0:
		s.stall = 0
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	return s, nil
}
