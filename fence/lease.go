package fence

// nodes/<node>.json, a node's lease. Part of the bucket format.
//
//	{"node":"4f1c...","address":"10.0.0.5:8080","heartbeat":42,"fenced":false}
//
// node repeats the key's node ID; address is where the node serves;
// heartbeat counts renewals (the node rewrites it every few seconds with
// If-Match); fenced is set by a peer that judged the node dead, with If-Match
// on the version it judged, so a node that renewed in the meantime is never
// fenced. A fenced lease is never renewed again: the node must stop.
//
// A missing lease proves nothing about its node: one deleted under a live
// node (by hand, or by a sweep on a skewed clock) is noticed only at the
// node's next renewal. So a claimant waits for a missing lease as for an
// unchanged heartbeat, Lease+Grace on its own clock, and SweepLeases never
// deletes the lease of a node that an own.json names.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/framectl/framectl/frames"
)

// ErrBadLease: a lease object does not parse or breaks a rule above.
var ErrBadLease = errors.New("fence: bad node lease")

// Lease is a node's lease record.
type Lease struct {
	Node      string `json:"node"`
	Address   string `json:"address"`
	Heartbeat uint64 `json:"heartbeat"`
	Fenced    bool   `json:"fenced"`
}

// Marshal encodes the lease.
func (l Lease) Marshal() []byte {
	b, _ := json.Marshal(l) // plain fields cannot fail
	return b
}

// ParseLease decodes a lease read from key, strictly: the node must be the
// one the key names.
func ParseLease(key string, data []byte) (Lease, error) {
	fail := func(msg string) (Lease, error) {
		return Lease{}, fmt.Errorf("%w %s: %s", ErrBadLease, key, msg)
	}
	var raw struct {
		Node      *string         `json:"node"`
		Address   *string         `json:"address"`
		Heartbeat json.RawMessage `json:"heartbeat"`
		Fenced    *bool           `json:"fenced"`
	}
	if msg := decodeStrict(data, &raw); msg != "" {
		return fail(msg)
	}
	if raw.Node == nil || raw.Address == nil || raw.Heartbeat == nil || raw.Fenced == nil {
		return fail("node, address, heartbeat and fenced are all required")
	}
	hb, err := parseCount(raw.Heartbeat)
	if err != nil {
		return fail("heartbeat " + err.Error())
	}
	l := Lease{Node: *raw.Node, Address: *raw.Address, Heartbeat: hb, Fenced: *raw.Fenced}
	k, err := frames.ParseKey(key)
	if err == nil && k.Kind == frames.KeyNode && k.Node != l.Node {
		return fail(fmt.Sprintf("names node %q, the key names %q", l.Node, k.Node))
	}
	if !frames.ValidNodeID(l.Node) {
		return fail(fmt.Sprintf("node %q is not a node ID", l.Node))
	}
	if _, port, err := net.SplitHostPort(l.Address); err != nil || port == "" {
		return fail(fmt.Sprintf("address %q is not host:port", l.Address))
	}
	return l, nil
}
