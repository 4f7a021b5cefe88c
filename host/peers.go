package host

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
	"github.com/framectl/framectl/peer"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/tails"
)

// PeersConfig turns on acknowledgement by followers: every actor this node
// opens acknowledges a commit once Followers other nodes (a quorum of
// them) hold it, or the bucket does, whichever comes first, and the bucket
// is written in the background (session.Config.Peers; the rule of what an
// acknowledged commit survives is package follow's). The node is in turn a
// follower of other nodes' actors, in a store under Dir/tails. Give every
// node of the cluster the same Key, Limits, Followers and Quorum.
type PeersConfig struct {
	// Listen is host:port the follower transport listens on (port 0
	// picks one). Advertise, when Listen binds a wildcard address, is
	// what peers dial (default: the bound address); it is written in the
	// node's lease.
	Listen, Advertise string
	// Key is the cluster key (peer.MinKeyBytes random bytes at least).
	Key []byte
	// TLS, when set, carries every connection over TLS (peer.Config.TLS).
	TLS *tls.Config
	// Followers and Quorum: quorum.Config's (defaults 3 and a majority).
	Followers, Quorum int
	// Limits are the cluster's (follow.Limits).
	Limits follow.Limits
	// MaxStoreBytes bounds what the follower store holds for every actor
	// together (tails.Config.MaxBytes; 0: its default).
	MaxStoreBytes int64
	// Heartbeat and SuspectAfter are the transport's failure detection
	// (peer.Config; defaults peer.DefaultHeartbeat and
	// peer.DefaultSuspectAfter): an actor whose owner its followers and
	// this node have not heard for SuspectAfter is claimed without
	// waiting for the owner's lease (quorum.Suspicion; "Failover" in the
	// package doc).
	Heartbeat, SuspectAfter time.Duration
	// IdentityCheck is how often the node checks that its follower store
	// is the one the bucket's identity record names (DefaultIdentityCheck
	// when zero; identity.go).
	IdentityCheck time.Duration
}

// tailsDir is the follower store's directory under Config.Dir: no actor's
// (those are namespace IDs of 22 characters).
const tailsDir = "tails"

// peering is what a host runs to acknowledge by followers.
type peering struct {
	store  *tails.Store
	node   *peer.Node
	hub    *quorum.Hub
	leases *quorum.Leases
	// suspicion confirms a holder gone for claims (session.Config.Suspect).
	suspicion *quorum.Suspicion
	ln        net.Listener
	addr      string         // advertised
	identity  fence.Identity // this open of the store (identity.go)
}

// startPeering opens the follower store and the transport's listener; the
// hub starts once the node is registered (attach).
func startPeering(ctx context.Context, cfg Config) (*peering, error) {
	pc := cfg.Peers
	store, err := tails.Open(filepath.Join(cfg.Dir, tailsDir), tails.Config{Limits: pc.Limits, MaxBytes: pc.MaxStoreBytes})
	if err != nil {
		return nil, fmt.Errorf("host: follower store: %w", err)
	}
	ident, err := openIdentity(ctx, cfg.Bucket, store, cfg.Logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", pc.Listen)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("host: follower transport: %w", err)
	}
	p := &peering{store: store, ln: ln, addr: ln.Addr().String(), identity: ident}
	if pc.Advertise != "" {
		p.addr = pc.Advertise
	}
	p.node, err = peer.NewNode(peer.Config{ID: follow.FollowerID(store.ID()), Key: pc.Key, TLS: pc.TLS, Limits: pc.Limits,
		Heartbeat: pc.Heartbeat, SuspectAfter: pc.SuspectAfter, Logger: cfg.Logger, Handler: func(from follow.FollowerID, actor string, m follow.Message) { p.hub.Handle(from, actor, m) }})
	if err != nil {
		ln.Close()
		store.Close()
		return nil, fmt.Errorf("host: follower transport: %w", err)
	}
	return p, nil
}

// retire fences the leases earlier processes on this node's follower store
// left (fence.Node.RetirePredecessors): the store's lock, held since
// startPeering, says they have ended. A failure is logged, not fatal:
// such a lease only delays the peers that take it for the live one.
func (p *peering) retire(ctx context.Context, node *fence.Node, log *slog.Logger) {
	if _, err := node.RetirePredecessors(ctx); err != nil {
		log.Warn("fencing the leases earlier processes on the follower store left", logattr.Node, node.ID(), logattr.Err, err)
	}
}

func (p *peering) close() error {
	if p.hub != nil {
		p.hub.Close()
	}
	return errors.Join(p.node.Close(), p.store.Close())
}

// newSession returns a new session of a's followers (quorum.Hub.Session);
// nil without Config.Peers.
func (h *Host) newSession(a *Actor) *quorum.Session {
	if h.peers == nil {
		return nil
	}
	return h.peers.hub.Session(frames.Actor{Namespace: h.namespaceID(a.key.ns), Actor: frames.ActorKey([]byte(a.key.id))})
}

// watchHolder makes this node watch the holder of an actor it forwards to,
// whose lease is lease (peer.Node.Watch), so that its own failure
// detection has an opinion when the holder dies; it reports whether this
// node suspects it now. Without peers, or for a holder without a peer
// transport, it does nothing and reports false.
func (h *Host) watchHolder(lease fence.Lease) bool {
	if h.peers == nil || lease.Follower == "" || lease.Peer == "" {
		return false
	}
	id := follow.FollowerID(lease.Follower)
	if id == h.peers.node.ID() {
		return false
	}
	v := h.peers.node.Silence(id)
	if !v.Known {
		if h.peers.node.SetAddr(id, lease.Peer) == nil {
			h.peers.node.Watch(id)
		}
		return false
	}
	return v.Suspected
}

// CutPeers closes the follower transport for good, leaving the rest of the
// node running: it no longer reaches its actors' followers, nor answers as
// one, nor hears or is heard by anyone (its peers suspect it). Its actors
// go on acknowledging by the bucket until failure detection elsewhere takes
// them (see Failover in the package doc), and its lease stays: it is a
// partition of one node from its peers, for tests of one (actorhost
// -fault-signals) and for an operator who must isolate a node's follower
// store at once. It does nothing without Config.Peers or a second time.
func (h *Host) CutPeers() {
	if h.peers == nil {
		return
	}
	h.peers.node.Close()
	h.log.Warn("follower transport cut: this node neither reaches nor serves followers any more")
}
