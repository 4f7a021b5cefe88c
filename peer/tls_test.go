package peer

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "framectl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf issues a certificate for 127.0.0.1, for a server and a client.
func (ca *testCA) leaf(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// config is mutual TLS: this certificate, and peers' checked against ca.
func (ca *testCA) config(t *testing.T, name string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, name)}, RootCAs: ca.pool, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert}
}

func tlsNodeConfig(id follow.FollowerID, key []byte, tc *tls.Config) Config {
	cfg := nodeConfig(id, key)
	cfg.TLS = tc
	return cfg
}

// Two nodes with certificates of one CA: the messages go, and the wire
// carries TLS records, not the handshake in the clear.
func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	key := testKey(1)
	b := startNode(t, tlsNodeConfig("b", key, ca.config(t, "b")), "")
	b.in.reply = func(from follow.FollowerID, actor string, m follow.Message) {
		b.Send(from, actor, &follow.Ack{Epoch: m.MsgEpoch()})
	}
	var mu sync.Mutex
	var wire bytes.Buffer
	p := startProxy(t, b.addr, func(conn int, toListener bool, off int, data []byte) {
		if conn == 0 && toListener {
			mu.Lock()
			wire.Write(data)
			mu.Unlock()
		}
	})
	a := startNode(t, tlsNodeConfig("a", key, ca.config(t, "a")), "")
	a.SetAddr("b", p.addr())
	for i := 1; i <= 20; i++ {
		a.Send("b", testActor, fence(i))
	}
	waitFor(t, "a hears 20 answers over TLS", func() bool { return len(a.in.all()) == 20 })
	mu.Lock()
	defer mu.Unlock()
	if w := wire.Bytes(); len(w) == 0 || w[0] != 0x16 {
		t.Errorf("the stream starts %x, not a TLS handshake record", w[:min(len(w), 8)])
	}
	if bytes.Contains(wire.Bytes(), []byte(helloMagic)) {
		t.Error("the hello is on the wire in the clear")
	}
}

// What TLS refuses: a plain dialer, a server certificate of another CA, a
// dialer without a client certificate. Nothing is delivered.
func TestTLSRefused(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	key := testKey(1)
	for _, c := range []struct {
		name string
		tc   *tls.Config
		want func(error) bool
	}{
		{"plain", nil, func(err error) bool { return err != nil }},
		{"another CA", other.config(t, "a"), func(err error) bool {
			var ua x509.UnknownAuthorityError
			return errors.As(err, &ua)
		}},
		{"no client certificate", &tls.Config{RootCAs: ca.pool}, func(err error) bool { return err != nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := startNode(t, tlsNodeConfig("b", key, ca.config(t, "b")), "")
			a := startNode(t, tlsNodeConfig("a", key, c.tc), "")
			a.SetAddr("b", b.addr)
			a.Send("b", testActor, fence(1))
			waitFor(t, "a's dial fails", func() bool { return a.Stats().Failed >= 1 })
			if err := a.Stats().LastError; !c.want(err) {
				t.Errorf("a: %v", err)
			}
			// a may have sent its proof before TLS refused it: its
			// frames must still never arrive.
			waitFor(t, "b refuses", func() bool { return b.Stats().Failed >= 1 })
			if st := b.Stats(); st.Delivered != 0 {
				t.Errorf("b delivered %d messages", st.Delivered)
			}
		})
	}
}

// Someone with a certificate of the cluster's CA but not the cluster key
// relays the handshake between two TLS connections of its own: the
// transcript binds each side's TLS connection, so the proofs fail.
func TestTLSRelayRefused(t *testing.T) {
	ca := newTestCA(t)
	key := testKey(1)
	b := startNode(t, tlsNodeConfig("b", key, ca.config(t, "b")), "")
	mitm := ca.config(t, "mitm")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", mitm)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := tls.Dial("tcp", b.addr, mitm)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close(); c.Close() }()
			go func() { io.Copy(c, s); s.Close(); c.Close() }()
		}
	}()
	a := startNode(t, tlsNodeConfig("a", key, ca.config(t, "a")), "")
	a.SetAddr("b", ln.Addr().String())
	a.Send("b", testActor, fence(1))
	waitFor(t, "a's dial fails", func() bool { return a.Stats().Failed >= 1 })
	connErr(t, a.Stats().LastError, "handshake", ErrAuth)
	if st := b.Stats(); st.Delivered != 0 || st.Accepted != 0 {
		t.Errorf("b: %+v", st)
	}
}
