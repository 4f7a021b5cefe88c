package peer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"

	"github.com/framectl/framectl/follow"
)

// received is a message a node's Handler got.
type received struct {
	from  follow.FollowerID
	actor string
	m     follow.Message
}

// inbox records what a Handler gets; reply, when set, answers each message.
type inbox struct {
	mu    sync.Mutex
	got   []received
	reply func(from follow.FollowerID, actor string, m follow.Message)
}

func (b *inbox) handle(from follow.FollowerID, actor string, m follow.Message) {
	b.mu.Lock()
	b.got = append(b.got, received{from, actor, m})
	reply := b.reply
	b.mu.Unlock()
	if reply != nil {
		reply(from, actor, m)
	}
}

func (b *inbox) all() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]received(nil), b.got...)
}

func (b *inbox) has(m follow.Message) bool {
	for _, r := range b.all() {
		if reflect.DeepEqual(r.m, m) {
			return true
		}
	}
	return false
}

// errLog is a slog.Handler that keeps every error logged.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (h *errLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *errLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *errLog) WithGroup(string) slog.Handler            { return h }
func (h *errLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// find returns the first *ConnError logged that matches target, of op.
func (h *errLog) find(op string, target error) *ConnError {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.errs {
		var ce *ConnError
		if errors.As(err, &ce) && ce.Op == op && errors.Is(err, target) {
			return ce
		}
	}
	return nil
}

// testNode is a node serving on 127.0.0.1, its inbox and its error log.
type testNode struct {
	*Node
	addr string
	in   *inbox
	log  *errLog
}

// startNode starts a node serving at addr ("" for a free port).
func startNode(t *testing.T, cfg Config, addr string) *testNode {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{addr: ln.Addr().String(), in: &inbox{}, log: &errLog{}}
	if cfg.Handler == nil {
		cfg.Handler = tn.in.handle
	}
	cfg.Logger = slog.New(tn.log)
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.Node = n
	done := make(chan error, 1)
	go func() { done <- n.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		n.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return tn
}

func nodeConfig(id follow.FollowerID, key []byte) Config {
	return Config{ID: id, Key: key}
}

// proxy forwards connections to target, applying edit to the bytes of
// the n-th connection it accepts (from 0), in each direction: toListener is
// what the dialer sends, and edit gets each piece and its offset in the
// stream.
type proxy struct {
	ln     net.Listener
	target string
	edit   func(conn int, toListener bool, off int, b []byte)
	mu     sync.Mutex
	n      int
	conns  []net.Conn
}

func startProxy(t *testing.T, target string, edit func(conn int, toListener bool, off int, b []byte)) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, edit: edit}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		i := p.n
		p.n++
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(i, true, c, s)
		go p.pipe(i, false, s, c)
	}
}

func (p *proxy) pipe(conn int, toListener bool, from, to net.Conn) {
	buf := make([]byte, 32<<10)
	off := 0
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if p.edit != nil {
				p.edit(conn, toListener, off, buf[:n])
			}
			off += n
			if _, err := to.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// Half the connection ended: end it whole.
	from.Close()
	to.Close()
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// flipAt returns an edit that flips the low bit of byte at of the
// direction given, on the first connection only.
func flipAt(toListener bool, at int) func(int, bool, int, []byte) {
	return func(conn int, dir bool, off int, b []byte) {
		if conn == 0 && dir == toListener && off <= at && at < off+len(b) {
			b[at-off] ^= 1
		}
	}
}
