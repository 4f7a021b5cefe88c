package peer

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/follow"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the encoder")

// A handshake and a frame each way, with fixed nonces, pinned byte for
// byte in testdata/golden: what the dialer writes and what the listener
// writes.
func TestWireGolden(t *testing.T) {
	key := testKey(1)
	dc, lc, derr, lerr, dtap, ltap := handshakePair(t, testConfig("a", key, 1), testConfig("b", key, 2), "b")
	if derr != nil || lerr != nil {
		t.Fatal(derr, lerr)
	}
	go dc.Send("db-1", testMessages[1])
	if _, _, err := lc.Receive(); err != nil {
		t.Fatal(err)
	}
	go lc.Send("db-2", testMessages[2])
	if _, _, err := dc.Receive(); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"dialer.bin": dtap.Written(), "listener.bin": ltap.Written()} {
		path := filepath.Join("testdata", "golden", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the wire holds\n%x\nthe golden file\n%x", name, got, want)
		}
	}
}

// The layout and key schedule drawn in doc.go, computed from the drawing
// (HKDF written out from RFC 5869) and compared with what goes on the wire.
func TestWireLayout(t *testing.T) {
	key := testKey(1)
	dc, lc, derr, lerr, dtap, ltap := handshakePair(t, testConfig("a", key, 1), testConfig("b", key, 2), "b")
	if derr != nil || lerr != nil {
		t.Fatal(derr, lerr)
	}
	nonce := func(seed byte) []byte {
		b := make([]byte, 32)
		seeded(seed).Read(b)
		return b
	}
	hello := func(role byte, seed byte, id string) []byte {
		b := append([]byte("fctlpeer"), 3, role)
		b = append(b, nonce(seed)...)
		return append(append(b, byte(len(id))), id...)
	}
	hmacOf := func(k []byte, parts ...[]byte) []byte {
		m := hmac.New(sha256.New, k)
		for _, p := range parts {
			m.Write(p)
		}
		return m.Sum(nil)
	}
	hkdf := func(secret, salt []byte, info string) []byte {
		prk := hmacOf(salt, secret)
		return hmacOf(prk, []byte(info), []byte{1})
	}
	dh, lh := hello(1, 1, "a"), hello(2, 2, "b")
	th := sha256.Sum256(bytes.Join([][]byte{[]byte("framectl peer handshake v2"), {0}, dh, lh}, nil))
	p := hkdf(key, []byte("framectl peer v2"), "handshake proof")

	go dc.Send("db-7", testMessages[0])
	if _, _, err := lc.Receive(); err != nil {
		t.Fatal(err)
	}
	// The payload is the actor's length and name, then the message in
	// follow's encoding, follow's to draw.
	message, err := follow.AppendMessage(nil, testMessages[0], follow.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	payload := append([]byte{4, 'd', 'b', '-', '7'}, message...)
	length := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	kdl := hkdf(key, th[:], "frames dialer to listener")
	seq := make([]byte, 8)

	want := map[string][]byte{
		"dialer": bytes.Join([][]byte{dh, hmacOf(p, []byte("dialer"), th[:]),
			length, hmacOf(kdl, []byte{1}, seq, length)[:16], payload, hmacOf(kdl, []byte{2}, seq, length, payload)}, nil),
		"listener": append(lh, hmacOf(p, []byte("listener"), th[:])...),
	}
	for name, got := range map[string][]byte{"dialer": dtap.Written(), "listener": ltap.Written()} {
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s wrote\n%x\nthe drawing gives\n%x", name, got, want[name])
		}
	}
}
