package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/logattr"
)

// maxHandshakes bounds the inbound connections a node holds before they
// authenticate (each for HandshakeTimeout at most): past it, a new one is
// closed at once. A node without the key can cost a node this many
// goroutines and buffers of a few KiB, no more.
const maxHandshakes = 64

// keepAlive finds a peer whose host vanished while the connection was
// idle, in about 30 s: the read then fails and the next Send redials.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// Node is one node's end of the transport: it accepts connections from
// peers (Serve), dials the peers it sends to (at the address SetAddr
// gave), and keeps one queue per peer (Send). Safe for concurrent use.
type Node struct {
	s          *settings
	ctx        context.Context // cancelled by Close: ends dials and handshakes
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	handshakes chan struct{}

	mu        sync.Mutex
	closed    bool
	addrs     map[follow.FollowerID]string
	peers     map[follow.FollowerID]*peerState
	listeners map[net.Listener]struct{}
	lastErr   error
	hear      map[follow.FollowerID]*hearing // hearing.go
	asks      map[uint64]pendingAsk
	dispatchs map[*dispatch]struct{} // of live readers, woken by Close

	sent, delivered, refused, lost, dials, accepted, failed atomic.Uint64
}

var _ Transport = (*Node)(nil)

// peerState is what a node keeps of one peer.
type peerState struct {
	id       follow.FollowerID
	queue    [][]byte // payloads (appendPayload), oldest first
	queued   int64    // the bytes of their frames (frameBytes)
	conns    []*Conn  // authenticated, live; the first carries the queue
	sending  bool     // its sender goroutine runs
	wake     chan struct{}
	failures int // dials failed and connections broken since a frame last went: the backoff
}

// Stats counts what a node did.
type Stats struct {
	Sent      uint64 // messages written whole to a connection
	Delivered uint64 // messages received, authenticated and decoded, handed to the Handler
	Refused   uint64 // Sends refused with ErrBackpressure
	Lost      uint64 // messages taken that the node knows no connection carried: being written when one broke, left for a peer with no route, or at Close
	Queued    int64  // bytes of the frames queued now, for all peers (frameBytes)
	Dials     uint64 // connections dialed
	Accepted  uint64 // inbound connections that authenticated
	Failed    uint64 // dials, handshakes and connections that ended with an error (not a peer closing between frames)
	LastError error  // the newest of those, a *ConnError
}

// NewNode returns a node that sends nothing until Send and accepts nothing
// until Serve.
func NewNode(cfg Config) (*Node, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	if s.handler == nil {
		return nil, fmt.Errorf("%w: Config.Handler is nil", ErrInvalid)
	}
	s.log = s.log.With(logattr.Subsystem, logattr.SubsystemPeer, logattr.Node, string(s.id))
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		s: s, ctx: ctx, cancel: cancel, handshakes: make(chan struct{}, maxHandshakes),
		addrs: map[follow.FollowerID]string{}, peers: map[follow.FollowerID]*peerState{}, listeners: map[net.Listener]struct{}{},
		hear: map[follow.FollowerID]*hearing{}, asks: map[uint64]pendingAsk{}, dispatchs: map[*dispatch]struct{}{},
	}
	n.wg.Add(1)
	go n.beatLoop()
	return n, nil
}

// ID is the node's own ID.
func (n *Node) ID() follow.FollowerID { return n.s.id }

// SetAddr says where peer id listens (host:port); "" forgets it. A peer
// without an address is reached only over connections it opened. A
// connection open already stays; the next dial uses the new address.
func (n *Node) SetAddr(id follow.FollowerID, addr string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: address of %s: %v", ErrInvalid, id, err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == "" {
		delete(n.addrs, id)
	} else {
		n.addrs[id] = addr
	}
	return nil
}

// Serve accepts peers' connections on ln until ctx ends or the node
// closes, then closes ln and returns nil. Each connection is handed to a
// goroutine that runs the handshake (over TLS when Config.TLS is set); one
// that fails it is closed, counted and logged, and carries nothing.
func (n *Node) Serve(ctx context.Context, ln net.Listener) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	n.listeners[ln] = struct{}{}
	n.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer func() {
		stop()
		n.mu.Lock()
		delete(n.listeners, ln)
		n.mu.Unlock()
		ln.Close()
	}()
	var delay time.Duration
	for {
		raw, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors, say: wait and go on, as
			// net/http's server does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			n.s.log.Warn("accept failed", logattr.Addr, ln.Addr().String(), logattr.Err, err)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			case <-n.ctx.Done():
			}
			continue
		}
		delay = 0
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			raw.Close()
			return nil
		}
		n.wg.Add(1)
		n.mu.Unlock()
		go n.accept(raw)
	}
}

func (n *Node) accept(raw net.Conn) {
	defer n.wg.Done()
	select {
	case n.handshakes <- struct{}{}:
	default:
		raw.Close()
		n.fail(&ConnError{Op: "handshake", Addr: remoteAddr(raw), Err: fmt.Errorf("%d handshakes in progress already: closed unread", maxHandshakes)})
		return
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(keepAlive)
	}
	var c net.Conn = raw
	if n.s.tls != nil {
		c = tls.Server(raw, n.s.tls)
	}
	conn, err := handshake(n.ctx, c, n.s, false, "")
	<-n.handshakes
	if err != nil {
		raw.Close()
		if n.ctx.Err() == nil {
			n.fail(err)
		}
		return
	}
	n.accepted.Add(1)
	n.attach(conn)
}

// Send queues m, for actor, for peer to and returns without waiting for
// the network (see Transport). It refuses, queuing nothing: an actor
// follow.ValidActor refuses or a message follow would not encode
// (ErrInvalid); a peer it has no connection with and no address for
// (ErrNoRoute); a peer whose queue holds Config.MaxQueueBytes
// (ErrBackpressure); anything once the node is closed (ErrClosed).
func (n *Node) Send(to follow.FollowerID, actor string, m follow.Message) error {
	payload, err := appendPayload(nil, actor, m, n.s.lim)
	if err != nil {
		return fmt.Errorf("peer: send to %s: %w", to, err)
	}
	return n.enqueue(to, payload)
}

// enqueue queues a payload (a message's or a control's) for peer to, on
// Send's terms.
func (n *Node) enqueue(to follow.FollowerID, payload []byte) error {
	if to == n.s.id {
		return fmt.Errorf("%w: node %s sending to itself", ErrInvalid, to)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	p := n.peers[to]
	if (p == nil || len(p.conns) == 0) && n.addrs[to] == "" {
		return fmt.Errorf("peer: send to %s: %w", to, ErrNoRoute)
	}
	if p == nil {
		p = &peerState{id: to, wake: make(chan struct{}, 1)}
		n.peers[to] = p
	}
	size := frameBytes(payload)
	if p.queued > 0 && p.queued+size > n.s.maxQueue {
		n.refused.Add(1)
		return fmt.Errorf("peer: send to %s: %d bytes queued, %d more would pass the bound of %d: %w", to, p.queued, size, n.s.maxQueue, ErrBackpressure)
	}
	p.queue = append(p.queue, payload)
	p.queued += size
	if !p.sending {
		n.startSender(p)
	}
	return nil
}

// startSender starts p's sender. n.mu held.
func (n *Node) startSender(p *peerState) {
	p.sending = true
	n.wg.Add(1)
	go n.sender(p)
}

// sender drains p's queue into its first connection, dialing one (with
// backoff) while it has none, and exits once the queue is empty.
func (n *Node) sender(p *peerState) {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		if n.closed || len(p.queue) == 0 {
			p.sending = false
			n.forget(p)
			n.mu.Unlock()
			return
		}
		if len(p.conns) == 0 {
			addr := n.addrs[p.id]
			if addr == "" {
				n.discard(p, "no connection and no address")
				p.sending = false
				n.forget(p)
				n.mu.Unlock()
				return
			}
			wait := backoff(p.failures)
			n.mu.Unlock()
			n.sleep(wait, p.wake)
			if n.ctx.Err() != nil {
				continue
			}
			n.mu.Lock()
			connected := len(p.conns) > 0 // an inbound one came meanwhile
			n.mu.Unlock()
			if connected {
				continue
			}
			c, err := n.dial(addr, p.id)
			if err != nil {
				n.mu.Lock()
				p.failures++
				n.mu.Unlock()
				if n.ctx.Err() == nil {
					n.fail(err)
				}
				continue
			}
			n.attach(c)
			continue
		}
		c := p.conns[0]
		payload := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.queued -= frameBytes(payload)
		n.mu.Unlock()
		if err := c.sendPayload(payload); err != nil {
			n.lost.Add(1)
			n.detach(p, c, err)
			continue
		}
		n.sent.Add(1)
		n.mu.Lock()
		p.failures = 0
		n.mu.Unlock()
	}
}

// backoff is how long to wait before a dial: nothing the first time, then
// 50 ms doubling to 5 s, each drawn between half and all of that (so that
// nodes that lost each other do not redial in step).
func backoff(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	d := min(50*time.Millisecond<<min(failures-1, 7), 5*time.Second)
	return d/2 + time.Duration(rand.Uint64()%uint64(d/2+1))
}

// sleep waits d, or until woken or the node closes.
func (n *Node) sleep(d time.Duration, wake <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	case <-n.ctx.Done():
	}
}

func (n *Node) dial(addr string, want follow.FollowerID) (*Conn, error) {
	n.dials.Add(1)
	ctx, cancel := context.WithTimeout(n.ctx, n.s.handshakeTimeout)
	defer cancel()
	d := net.Dialer{KeepAliveConfig: keepAlive}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &ConnError{Op: "dial", Addr: addr, Peer: want, Err: err}
	}
	var c net.Conn = raw
	if n.s.tls != nil {
		cfg := n.s.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		c = tls.Client(raw, cfg)
	}
	conn, err := handshake(ctx, c, n.s, true, want)
	if err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// attach adds an authenticated connection to its peer and starts reading it.
func (n *Node) attach(c *Conn) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		c.Close()
		return
	}
	p := n.peers[c.Peer()]
	if p == nil {
		p = &peerState{id: c.Peer(), wake: make(chan struct{}, 1)}
		n.peers[c.Peer()] = p
	}
	p.conns = append(p.conns, c)
	n.watchLocked(c.Peer(), time.Now())
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if len(p.queue) > 0 && !p.sending {
		n.startSender(p)
	}
	n.wg.Add(1)
	n.mu.Unlock()
	n.s.log.Info("connected", logattr.Peer, string(c.Peer()), logattr.Addr, c.RemoteAddr())
	go n.reader(p, c)
}

// reader reads c: a frame counts as hearing from the peer (hearing.go), a
// control frame is acted on at once, a message goes to the connection's
// dispatch, which runs the Handler.
func (n *Node) reader(p *peerState, c *Conn) {
	defer n.wg.Done()
	d := n.startDispatch(c.Peer())
	n.mu.Lock()
	n.dispatchs[d] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.dispatchs, d)
		n.mu.Unlock()
		d.close()
	}()
	for {
		f, err := c.next()
		if err != nil {
			n.detach(p, c, err)
			return
		}
		n.mu.Lock()
		n.heardLocked(c.Peer(), time.Now())
		n.mu.Unlock()
		if f.m == nil {
			n.onControl(c.Peer(), f.ctl)
			continue
		}
		if !d.push(c, f) {
			n.lost.Add(1)
			return // closing
		}
	}
}

// detach takes c from p and closes it; err is why it ended. The sender
// and the reader of a connection may both fail on it: the first counts
// (it takes c before it closes it, so the other's error, from the close,
// is not reported).
func (n *Node) detach(p *peerState, c *Conn, err error) {
	n.mu.Lock()
	i := slices.Index(p.conns, c)
	if i < 0 {
		n.mu.Unlock()
		c.Close()
		return
	}
	p.conns = slices.Delete(p.conns, i, i+1)
	closing := n.closed
	clean := err == io.EOF // Receive: the peer closed between frames
	if !closing && !clean {
		p.failures++
	}
	if !closing && len(p.conns) == 0 && len(p.queue) > 0 && !p.sending {
		n.startSender(p)
	}
	n.forget(p)
	n.mu.Unlock()
	c.Close()
	switch {
	case closing:
	case clean:
		n.s.log.Info("peer closed the connection", logattr.Peer, string(c.Peer()), logattr.Addr, c.RemoteAddr())
	default:
		n.fail(err)
	}
}

// discard drops what p has queued, counted as lost. n.mu held.
func (n *Node) discard(p *peerState, why string) {
	if len(p.queue) == 0 {
		return
	}
	n.lost.Add(uint64(len(p.queue)))
	n.s.log.Warn("messages dropped: "+why, logattr.Peer, string(p.id), logattr.Lost, len(p.queue))
	p.queue, p.queued = nil, 0
}

// forget drops p once nothing refers to it. n.mu held.
func (n *Node) forget(p *peerState) {
	if len(p.conns) == 0 && len(p.queue) == 0 && !p.sending && n.peers[p.id] == p {
		delete(n.peers, p.id)
	}
}

func (n *Node) fail(err error) {
	n.failed.Add(1)
	n.mu.Lock()
	n.lastErr = err
	n.mu.Unlock()
	var ce *ConnError
	if errors.As(err, &ce) {
		n.s.log.Warn("connection failed", logattr.Peer, string(ce.Peer), logattr.Addr, ce.Addr, logattr.Err, err)
		return
	}
	n.s.log.Warn("connection failed", logattr.Err, err)
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	var queued int64
	for _, p := range n.peers {
		queued += p.queued
	}
	last := n.lastErr
	n.mu.Unlock()
	return Stats{
		Sent: n.sent.Load(), Delivered: n.delivered.Load(), Refused: n.refused.Load(), Lost: n.lost.Load(), Queued: queued,
		Dials: n.dials.Load(), Accepted: n.accepted.Load(), Failed: n.failed.Load(), LastError: last,
	}
}

// Close stops serving, closes every connection, drops what is queued
// (counted as lost) and returns once no goroutine of the node runs, a
// Handler call included.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.cancel()
	for ln := range n.listeners {
		ln.Close()
	}
	for d := range n.dispatchs {
		go d.wake() // outside n.mu: a push waiting holds d.mu
	}
	var conns []*Conn
	for _, p := range n.peers {
		conns = append(conns, p.conns...)
		if len(p.queue) > 0 {
			n.lost.Add(uint64(len(p.queue)))
			p.queue, p.queued = nil, 0
		}
	}
	n.mu.Unlock()
	// Outside the lock: closing a TLS connection writes its close alert.
	for _, c := range conns {
		c.Close()
	}
	n.wg.Wait()
	return nil
}
