package peer

import (
	"sync"

	"github.com/framectl/framectl/follow"
)

// dispatch hands one connection's messages to the Handler on a goroutine
// of its own, so that the connection's reader keeps reading while a
// Handler runs (a follower's fsync): heartbeats and questions are read and
// answered on time, and a peer is never judged silent because this node
// was busy. What waits is bounded by Config.MaxQueueBytes of frames (one
// larger message is taken when nothing waits); past it the reader waits
// for the Handler, the connection stops being read, and the sender's
// queue fills, the back-pressure doc.go describes. Meanwhile the reader
// marks the connection held (Conn.held), and the peer counts as heard.
type dispatch struct {
	n    *Node
	from follow.FollowerID

	mu      sync.Mutex
	cond    *sync.Cond
	waiting []frame
	bytes   int64
	closed  bool // the reader ended: deliver what waits, then stop
}

// startDispatch starts the goroutine that calls the Handler for c's
// messages. n.wg counts it.
func (n *Node) startDispatch(from follow.FollowerID) *dispatch {
	d := &dispatch{n: n, from: from}
	d.cond = sync.NewCond(&d.mu)
	n.wg.Add(1)
	go d.run()
	return d
}

// push queues f, counted by its payload's bytes, waiting while the queue
// is full. It returns false once the node closed.
func (d *dispatch) push(c *Conn, f frame) bool {
	size := f.size
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiting) > 0 && d.bytes+size > d.n.s.maxQueue {
		c.held.Store(true)
		for len(d.waiting) > 0 && d.bytes+size > d.n.s.maxQueue && d.n.ctx.Err() == nil {
			d.cond.Wait()
		}
		c.held.Store(false)
	}
	if d.n.ctx.Err() != nil {
		return false
	}
	d.waiting = append(d.waiting, f)
	d.bytes += size
	d.cond.Broadcast()
	return true
}

// close says the reader ended: what waits is still delivered.
func (d *dispatch) close() {
	d.mu.Lock()
	d.closed = true
	d.cond.Broadcast()
	d.mu.Unlock()
}

// wake makes a push or run blocked in Wait look at the node again (Close).
func (d *dispatch) wake() {
	d.mu.Lock()
	d.cond.Broadcast()
	d.mu.Unlock()
}

func (d *dispatch) run() {
	defer d.n.wg.Done()
	d.mu.Lock()
	for {
		for len(d.waiting) == 0 && !d.closed && d.n.ctx.Err() == nil {
			d.cond.Wait()
		}
		if d.n.ctx.Err() != nil {
			// Closed: what waits is lost, as anything in flight is.
			d.n.lost.Add(uint64(len(d.waiting)))
			d.waiting = nil
			d.mu.Unlock()
			return
		}
		if len(d.waiting) == 0 { // closed, all delivered
			d.mu.Unlock()
			return
		}
		f := d.waiting[0]
		d.waiting[0] = frame{}
		d.waiting = d.waiting[1:]
		d.mu.Unlock()
		d.n.delivered.Add(1)
		d.n.s.handler(d.from, f.actor, f.m)
		d.mu.Lock()
		d.bytes -= f.size
		d.cond.Broadcast()
	}
}
