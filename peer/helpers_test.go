package peer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/internal/conntap"
)

// testKey is a cluster key for tests: 32 bytes drawn from seed.
func testKey(seed uint64) []byte {
	k := make([]byte, 32)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1}).Read(k)
	return k
}

// seeded is a Rand that replays: the nonces of a handshake are the same on
// every run with the same seed.
func seeded(seed byte) io.Reader { return rand.NewChaCha8([32]byte{seed, 7}) }

func testConfig(id follow.FollowerID, key []byte, seed byte) Config {
	return Config{ID: id, Key: key, Rand: seeded(seed), HandshakeTimeout: 30 * time.Second}
}

// handshakePair runs Client (dialer cfg, expecting want) and Server
// (listener cfg) against each other over a pipe, each end tapped.
func handshakePair(t *testing.T, dialer, listener Config, want follow.FollowerID) (dc, lc *Conn, derr, lerr error, dtap, ltap *conntap.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	dtap, ltap = &conntap.Conn{Conn: a}, &conntap.Conn{Conn: b}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		lc, lerr = Server(context.Background(), ltap, listener)
		if lerr != nil {
			b.Close()
		}
	}()
	dc, derr = Client(context.Background(), dtap, dialer, want)
	if derr != nil {
		a.Close()
	}
	wg.Wait()
	return
}

// connected is handshakePair that must succeed.
func connected(t *testing.T, dialer, listener Config) (dc, lc *Conn) {
	t.Helper()
	dc, lc, derr, lerr, _, _ := handshakePair(t, dialer, listener, listener.ID)
	if derr != nil || lerr != nil {
		t.Fatalf("handshake: dialer %v, listener %v", derr, lerr)
	}
	return dc, lc
}

// wireConn is a net.Conn that reads the bytes given and keeps what is
// written: the other side of a connection, scripted.
type wireConn struct {
	r     *bytes.Reader
	wrote bytes.Buffer
}

func newWire(b []byte) *wireConn                     { return &wireConn{r: bytes.NewReader(b)} }
func (w *wireConn) Read(b []byte) (int, error)       { return w.r.Read(b) }
func (w *wireConn) Write(b []byte) (int, error)      { return w.wrote.Write(b) }
func (w *wireConn) Close() error                     { return nil }
func (w *wireConn) LocalAddr() net.Addr              { return wireAddr{} }
func (w *wireConn) RemoteAddr() net.Addr             { return wireAddr{} }
func (w *wireConn) SetDeadline(time.Time) error      { return nil }
func (w *wireConn) SetReadDeadline(time.Time) error  { return nil }
func (w *wireConn) SetWriteDeadline(time.Time) error { return nil }

type wireAddr struct{}

func (wireAddr) Network() string { return "wire" }
func (wireAddr) String() string  { return "wire" }

// allocatedBy is the bytes f allocates (the whole process's, so an upper
// bound of f's own).
func allocatedBy(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// connErr asserts err is a *ConnError of op matching target.
func connErr(t *testing.T, err error, op string, target error) *ConnError {
	t.Helper()
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *ConnError", err, err)
	}
	if ce.Op != op {
		t.Errorf("error %v: op %q, want %q", err, ce.Op, op)
	}
	if !errors.Is(err, target) {
		t.Errorf("error %v does not match %v", err, target)
	}
	return ce
}

// waitFor polls cond until it holds, failing the test after a generous
// bound: the bound catches a hang, it measures nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var goldenFence = &follow.Fence{Epoch: 7}

// testActor is the actor the tests' messages are for, when one will do.
const testActor = "db-1"
