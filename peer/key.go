package peer

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/framectl/framectl/follow"
)

// MinKeyBytes is the shortest cluster key accepted: 256 bits. The key must
// be random bytes, not a password: anyone who can connect to a node gets
// a listener's proof, and anyone who watches a handshake on plain TCP
// both proofs, to test guesses of the key against offline, which 256
// random bits put out of reach.
const MinKeyBytes = 32

// maxIDBytes bounds a node ID: its length is one byte of the handshake.
const maxIDBytes = 255

// Part of the wire format (doc.go): the labels of the key schedule. Never
// change them; a new version of the handshake gets new ones.
const (
	keySalt          = "framectl peer v2"
	keyInfoProof     = "handshake proof"
	keyInfoToListen  = "frames dialer to listener"
	keyInfoToDialer  = "frames listener to dialer"
	proofLabelListen = "listener"
	proofLabelDialer = "dialer"
)

func checkKey(key []byte) error {
	if len(key) < MinKeyBytes {
		return fmt.Errorf("%w: %d bytes, %d at least", ErrWeakKey, len(key), MinKeyBytes)
	}
	if bytes.Count(key, key[:1]) == len(key) {
		return fmt.Errorf("%w: %d bytes all %#02x", ErrWeakKey, len(key), key[0])
	}
	return nil
}

// checkID is what a node ID must be, on either side of the wire: 1 to 255
// bytes of UTF-8 without control characters, so that it can be logged and
// named in an error as it is.
func checkID(id follow.FollowerID) error {
	switch {
	case len(id) == 0:
		return fmt.Errorf("empty node ID")
	case len(id) > maxIDBytes:
		return fmt.Errorf("node ID of %d bytes, %d at most", len(id), maxIDBytes)
	case !utf8.ValidString(string(id)):
		return fmt.Errorf("node ID %q is not UTF-8", id)
	}
	for _, r := range string(id) {
		if unicode.IsControl(r) {
			return fmt.Errorf("node ID %q holds a control character", id)
		}
	}
	return nil
}

// schedule is the keys a node derives from the cluster key (doc.go, "Keys").
type schedule struct {
	cluster []byte // a copy of the cluster key
	proof   []byte // HKDF(cluster key, salt, "handshake proof")
}

func newSchedule(key []byte) (*schedule, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	cluster := bytes.Clone(key)
	proof, err := hkdf.Key(sha256.New, cluster, []byte(keySalt), keyInfoProof, sha256.Size)
	if err != nil {
		return nil, err
	}
	return &schedule{cluster: cluster, proof: proof}, nil
}

// prove is a side's proof that it holds the key, bound to the transcript.
func (s *schedule) prove(label string, transcript []byte) []byte {
	m := hmac.New(sha256.New, s.proof)
	m.Write([]byte(label))
	m.Write(transcript)
	return m.Sum(nil)
}

// frameKey is the MAC key of one direction of one connection: fresh with
// every handshake (the transcript holds both nonces) and bound to both
// node IDs.
func (s *schedule) frameKey(info string, transcript []byte) []byte {
	k, err := hkdf.Key(sha256.New, s.cluster, transcript, info, sha256.Size)
	if err != nil {
		// hkdf.Key fails only for a length past 255 hash sizes.
		panic(err)
	}
	return k
}
