package fuzz

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/framectl/framectl/fence"
)

// The ownership record (own.json) and node leases (nodes/<node>.json) are
// bucket data too: any bytes either decode to a record that re-encodes to
// itself, or fail with the package's sentinel and the object key. Neither
// parser may panic.

const (
	ownKey   = "do/fuzz/61/own.json"
	leaseKey = "nodes/0123456789abcdef0123456789abcdef.json"

	withFollowers = `{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","retention":"24h0m0s","followers":["1111","2222","3333"],"quorum":2}`
	withPeer      = `{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false,"peer":"127.0.0.1:7000","follower":"9a0b1c2d3e4f5a6b"}`
)

func FuzzOwnRecord(f *testing.F) {
	for _, s := range []string{
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080"}`,
		`{"epoch":8,"node":"","address":""}`,
		`{"epoch":1,"node":"0123456789abcdef0123456789abcdef","address":"[::1]:80"}`,
		`{"epoch":0,"node":"","address":""}`,
		`{"epoch":7.0,"node":"","address":""}`,
		`{"epoch":7,"node":"","address":"","extra":1}`,
		`{"epoch":7,"node":"","address":""} {}`,
		`{"epoch":18446744073709551615,"node":"","address":""}`,
		withFollowers,
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","followers":["fedcba9876543210fedcba9876543210"],"quorum":1}`,
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","followers":[],"quorum":0}`,
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","followers":["a","a"],"quorum":1}`,
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","followers":["0123456789abcdef0123456789abcdef"],"quorum":1}`,
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","followers":["a","b"],"quorum":3}`,
		`{"epoch":7,"node":"","address":"","followers":["a"],"quorum":1}`,
		`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080","quorum":1}`,
		``, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := fence.ParseRecord(ownKey, data)
		if err != nil {
			if !errors.Is(err, fence.ErrBadRecord) || !strings.Contains(err.Error(), ownKey) {
				t.Fatalf("error %q does not match ErrBadRecord or name %s", err, ownKey)
			}
			return
		}
		if r.Epoch == 0 || r.Released() != (r.Address == "") {
			t.Fatalf("accepted an invalid record %+v from %q", r, data)
		}
		if (len(r.Followers) == 0) != (r.Quorum == 0) || (r.Released() && len(r.Followers) > 0) ||
			len(r.Followers) > fence.MaxFollowers || r.Quorum < 0 || r.Quorum > len(r.Followers) ||
			slices.Contains(r.Followers, r.Node) || len(slices.Compact(slices.Sorted(slices.Values(r.Followers)))) != len(r.Followers) {
			t.Fatalf("accepted an invalid follower set %+v from %q", r, data)
		}
		again, err := fence.ParseRecord(ownKey, r.Marshal())
		if err != nil || !again.Equal(r) {
			t.Fatalf("record %+v re-encoded as %q parses to %+v, %v", r, r.Marshal(), again, err)
		}
	})
}

func FuzzLease(f *testing.F) {
	for _, s := range []string{
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":0,"fenced":true}`,
		`{"node":"fedcba9876543210fedcba9876543210","address":"127.0.0.1:9000","heartbeat":1,"fenced":false}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1","heartbeat":1,"fenced":false}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":-1,"fenced":false}`,
		withPeer,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false,"peer":""}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false,"peer":"127.0.0.1:7000"}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false,"follower":"9a0b1c2d3e4f5a6b"}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false,"peer":null}`,
		`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false,"peer":"nohost"}`,
		``, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := fence.ParseLease(leaseKey, data)
		if err != nil {
			if !errors.Is(err, fence.ErrBadLease) || !strings.Contains(err.Error(), leaseKey) {
				t.Fatalf("error %q does not match ErrBadLease or name %s", err, leaseKey)
			}
			return
		}
		if l.Node != "0123456789abcdef0123456789abcdef" {
			t.Fatalf("accepted a lease of node %q under key %s", l.Node, leaseKey)
		}
		again, err := fence.ParseLease(leaseKey, l.Marshal())
		if err != nil || again != l {
			t.Fatalf("lease %+v re-encoded as %q parses to %+v, %v", l, l.Marshal(), again, err)
		}
	})
}

const (
	identityKey = "followers/9a0b1c2d3e4f5a6b.json"
	identity    = `{"follower":"9a0b1c2d3e4f5a6b","generation":3,"open":"00112233445566778899aabbccddeeff"}`
)

// A follower store's identity record (followers/<id>.json) is bucket data
// like the others.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{
		identity,
		`{"follower":"9a0b1c2d3e4f5a6b","generation":0,"open":"00112233445566778899aabbccddeeff"}`,
		`{"follower":"1111111111111111","generation":3,"open":"00112233445566778899aabbccddeeff"}`,
		`{"follower":"9a0b1c2d3e4f5a6b","generation":3,"open":"00112233445566778899AABBCCDDEEFF"}`,
		`{"follower":"9a0b1c2d3e4f5a6b","generation":18446744073709551615,"open":"00112233445566778899aabbccddeeff"}`,
		`{"follower":"9a0b1c2d3e4f5a6b","generation":3}`,
		``, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := fence.ParseIdentity(identityKey, data)
		if err != nil {
			if !errors.Is(err, fence.ErrBadIdentity) || !strings.Contains(err.Error(), identityKey) {
				t.Fatalf("error %q does not match ErrBadIdentity or name %s", err, identityKey)
			}
			return
		}
		if r.Follower != "9a0b1c2d3e4f5a6b" || r.Generation == 0 || len(r.Open) != 32 {
			t.Fatalf("accepted %+v under key %s", r, identityKey)
		}
		again, err := fence.ParseIdentity(identityKey, r.Marshal())
		if err != nil || again != r {
			t.Fatalf("record %+v re-encoded as %q parses to %+v, %v", r, r.Marshal(), again, err)
		}
	})
}

// The valid seeds must parse, or the fuzzers above start from errors only.
func TestFenceSeedsParse(t *testing.T) {
	if _, err := fence.ParseIdentity(identityKey, []byte(identity)); err != nil {
		t.Error(err)
	}
	if _, err := fence.ParseRecord(ownKey, []byte(`{"epoch":7,"node":"0123456789abcdef0123456789abcdef","address":"10.0.0.5:8080"}`)); err != nil {
		t.Error(err)
	}
	if _, err := fence.ParseRecord(ownKey, []byte(`{"epoch":8,"node":"","address":""}`)); err != nil {
		t.Error(err)
	}
	if _, err := fence.ParseLease(leaseKey, []byte(`{"node":"0123456789abcdef0123456789abcdef","address":"127.0.0.1:9000","heartbeat":42,"fenced":false}`)); err != nil {
		t.Error(err)
	}
	if r, err := fence.ParseRecord(ownKey, []byte(withFollowers)); err != nil || len(r.Followers) != 3 || r.Quorum != 2 {
		t.Errorf("%+v, %v", r, err)
	}
	if l, err := fence.ParseLease(leaseKey, []byte(withPeer)); err != nil || l.Peer != "127.0.0.1:7000" {
		t.Errorf("%+v, %v", l, err)
	}
}
