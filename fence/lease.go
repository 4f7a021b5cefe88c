package fence

import (
	"encoding/json"
	"fmt"
	"net"

	"github.com/framectl/framectl/frames"
)

// ErrBadLease: a lease object does not parse or breaks a rule of its format
// ("Node lease" in the package documentation, doc.go), or a key under
// nodes/ is not a lease's. It is damage: it matches frames.ErrDamage.
var ErrBadLease = frames.NewDamage("fence: bad node lease")

// Lease is a node's lease record, nodes/<node>.json. Its format is under
// "Node lease" in the package documentation (doc.go).
type Lease struct {
	Node      string `json:"node"`
	Address   string `json:"address"`
	Heartbeat uint64 `json:"heartbeat"`
	Fenced    bool   `json:"fenced"`
	// Peer is where the node serves the follower transport (package
	// peer), "" if it serves none.
	Peer string `json:"peer,omitempty"`
	// Follower is the follower ID the node serves at Peer: its store's
	// (tails.Store.ID), which outlives the node when a process restarts
	// on the same store. Present exactly when Peer is.
	Follower string `json:"follower,omitempty"`
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
		return Lease{}, badLease(key, msg)
	}
	var raw struct {
		Node      *string         `json:"node"`
		Address   *string         `json:"address"`
		Heartbeat json.RawMessage `json:"heartbeat"`
		Fenced    *bool           `json:"fenced"`
		Peer      json.RawMessage `json:"peer"`
		Follower  json.RawMessage `json:"follower"`
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
	if raw.Peer != nil {
		// Marshal leaves out an empty peer: present, it is an address
		// (null and "" are not).
		var peer string
		if json.Unmarshal(raw.Peer, &peer) != nil {
			return fail(fmt.Sprintf("peer %s is not a string", raw.Peer))
		}
		if _, port, err := net.SplitHostPort(peer); err != nil || port == "" {
			return fail(fmt.Sprintf("peer %q is not host:port", peer))
		}
		l.Peer = peer
	}
	if raw.Follower != nil {
		var f string
		if json.Unmarshal(raw.Follower, &f) != nil || !frames.ValidNodeID(f) {
			return fail(fmt.Sprintf("follower %s is not a node ID", raw.Follower))
		}
		l.Follower = f
	}
	if (l.Peer == "") != (l.Follower == "") {
		return fail("peer and follower go together: one without the other")
	}
	return l, nil
}
