package fence

// own.json, the ownership record of one actor. Part of the bucket format.
//
//	{"epoch":7,"node":"4f1c...","address":"10.0.0.5:8080"}
//
// epoch is the ownership epoch of the newest claim (1 or more); node is the
// holder's node ID, "" once released (the epoch is kept, so the next claim
// writes epoch+1, or more if the bucket holds a newer session); address is
// where the holder serves requests, "" when released. Exactly these three
// fields, nothing else: a record that does not parse is reported as
// damaged, never taken for an absent one.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/framectl/framectl/frames"
)

// MaxRecordBytes bounds own.json: anything larger is not a record.
const MaxRecordBytes = 4 << 10

// ErrBadRecord: own.json does not parse or breaks a rule above.
var ErrBadRecord = errors.New("fence: bad ownership record")

// Record is an actor's ownership record.
type Record struct {
	Epoch   uint64 `json:"epoch"`
	Node    string `json:"node"`
	Address string `json:"address"`
}

// Released reports whether nobody holds the actor.
func (r Record) Released() bool { return r.Node == "" }

// Marshal encodes the record.
func (r Record) Marshal() []byte {
	b, _ := json.Marshal(r) // three plain fields cannot fail
	return b
}

// decodeStrict decodes one small JSON object into v, refusing unknown
// fields, anything after the object, and more than MaxRecordBytes. It
// returns what is wrong, "" when nothing is.
func decodeStrict(data []byte, v any) string {
	if len(data) == 0 {
		return "empty object"
	}
	if len(data) > MaxRecordBytes {
		return fmt.Sprintf("%d bytes, more than %d", len(data), MaxRecordBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err.Error()
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil || dec.More() {
		return "data after the JSON object"
	}
	return ""
}

// parseCount parses a bare JSON integer in 0..2^64-1: not "7", not 7.0, not
// 7e0, not -0.
func parseCount(raw json.RawMessage) (uint64, error) {
	s := string(raw)
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%s has a leading zero", s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a whole number in 0..2^64-1", s)
	}
	return n, nil
}

// ParseRecord decodes own.json read from key, strictly.
func ParseRecord(key string, data []byte) (Record, error) {
	fail := func(msg string) (Record, error) {
		return Record{}, fmt.Errorf("%w %s: %s", ErrBadRecord, key, msg)
	}
	var raw struct {
		Epoch   json.RawMessage `json:"epoch"`
		Node    *string         `json:"node"`
		Address *string         `json:"address"`
	}
	if msg := decodeStrict(data, &raw); msg != "" {
		return fail(msg)
	}
	if raw.Epoch == nil || raw.Node == nil || raw.Address == nil {
		return fail("epoch, node and address are all required")
	}
	epoch, err := parseCount(raw.Epoch)
	if err != nil || epoch == 0 {
		return fail(fmt.Sprintf("epoch %s is not a whole number of 1 or more", raw.Epoch))
	}
	r := Record{Epoch: epoch, Node: *raw.Node, Address: *raw.Address}
	switch {
	case r.Node == "" && r.Address != "":
		return fail("a released record has no address")
	case r.Node != "" && !frames.ValidNodeID(r.Node):
		return fail(fmt.Sprintf("node %q is not a node ID", r.Node))
	case r.Node != "":
		if _, port, err := net.SplitHostPort(r.Address); err != nil || port == "" {
			return fail(fmt.Sprintf("address %q is not host:port", r.Address))
		}
	}
	return r, nil
}
