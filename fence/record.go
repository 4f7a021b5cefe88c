package fence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/framectl/framectl/frames"
)

// MaxRecordBytes bounds own.json: anything larger is not a record.
const MaxRecordBytes = 4 << 10

// ErrBadRecord: own.json does not parse or breaks a rule of its format
// ("Ownership record" in the package documentation, doc.go). It is damage:
// it matches frames.ErrDamage.
var ErrBadRecord = frames.NewDamage("fence: bad ownership record")

// MaxRetention bounds a record's retention: a hundred years.
const MaxRetention = 100 * 365 * 24 * time.Hour

// MaxFollowers bounds a record's follower set. Seven tolerates three lost
// followers at a majority quorum (package follow, "What an acknowledged
// commit survives"); more costs every commit a message per follower for
// little.
const MaxFollowers = 7

// Record is an actor's ownership record, own.json. Its format is under
// "Ownership record" in the package documentation (doc.go).
type Record struct {
	Epoch   frames.Epoch
	Node    string
	Address string
	// Seq, on a released record, is the last sequence number of the
	// actor's history at the release (0: unknown).
	Seq frames.Seq
	// Retention is the writer's retention window (see the format in the
	// package documentation).
	Retention time.Duration
	// Followers and Quorum, on a held record, are the holder's follower
	// set (node IDs) and its quorum (package follow): where a takeover
	// fences the old epoch and recovers its tail. None: bucket-only.
	Followers []string
	Quorum    int
}

// Equal reports whether r and o are the same record (the same bytes in
// own.json).
func (r Record) Equal(o Record) bool {
	return r.Epoch == o.Epoch && r.Node == o.Node && r.Address == o.Address && r.Seq == o.Seq &&
		r.Retention == o.Retention && r.Quorum == o.Quorum && slices.Equal(r.Followers, o.Followers)
}

// Released reports whether nobody holds the actor.
func (r Record) Released() bool { return r.Node == "" }

// recordJSON is the record as stored.
type recordJSON struct {
	Epoch     frames.Epoch `json:"epoch"`
	Node      string       `json:"node"`
	Address   string       `json:"address"`
	Seq       frames.Seq   `json:"seq,omitempty"`
	Retention string       `json:"retention,omitempty"`
	Followers []string     `json:"followers,omitempty"`
	Quorum    int          `json:"quorum,omitempty"`
}

// MarshalJSON encodes the record as own.json holds it (Marshal), so that
// a Record inside another JSON document reads the same.
func (r Record) MarshalJSON() ([]byte, error) { return r.Marshal(), nil }

// Marshal encodes the record.
func (r Record) Marshal() []byte {
	j := recordJSON{Epoch: r.Epoch, Node: r.Node, Address: r.Address, Seq: r.Seq, Followers: r.Followers, Quorum: r.Quorum}
	if r.Retention != 0 {
		j.Retention = r.Retention.String()
	}
	b, _ := json.Marshal(j) // plain fields cannot fail
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
		return Record{}, badRecord(key, msg)
	}
	var raw struct {
		Epoch     json.RawMessage `json:"epoch"`
		Node      *string         `json:"node"`
		Address   *string         `json:"address"`
		Seq       json.RawMessage `json:"seq"`
		Retention *string         `json:"retention"`
		Followers *[]string       `json:"followers"`
		Quorum    json.RawMessage `json:"quorum"`
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
	r := Record{Epoch: frames.Epoch(epoch), Node: *raw.Node, Address: *raw.Address}
	if raw.Seq != nil {
		seq, err := parseCount(raw.Seq)
		if err != nil {
			return fail("seq " + err.Error())
		}
		r.Seq = frames.Seq(seq)
		if r.Node != "" {
			return fail("seq belongs on a released record only")
		}
	}
	if raw.Retention != nil {
		d, err := time.ParseDuration(*raw.Retention)
		if err != nil || d < 0 || d > MaxRetention {
			return fail(fmt.Sprintf("retention %q is not a duration from 0 to %v", *raw.Retention, MaxRetention))
		}
		r.Retention = d
	}
	switch {
	case (raw.Followers == nil) != (raw.Quorum == nil):
		return fail("followers and quorum go together: one without the other")
	case raw.Followers != nil && len(*raw.Followers) == 0:
		return fail("an empty followers array: a record without followers has neither followers nor quorum")
	case raw.Followers != nil:
		q, err := parseCount(raw.Quorum)
		if err != nil {
			return fail("quorum " + err.Error())
		}
		if q > MaxFollowers {
			return fail(fmt.Sprintf("quorum %d is more than %d", q, MaxFollowers))
		}
		r.Followers, r.Quorum = *raw.Followers, int(q)
	}
	if msg := checkFollowers(r.Node, r.Followers, r.Quorum); msg != "" {
		return fail(msg)
	}
	switch {
	case !bytes.Equal(data, r.Marshal()):
		// fence writes exactly Marshal's bytes, so any other bytes that
		// parse (JSON matches keys case-insensitively, for one) are a
		// record altered into another valid one.
		return fail(fmt.Sprintf("altered: the bytes are not the encoding fence writes for the record they parse to (%s)", r.Marshal()))
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

// checkFollowers checks a follower set against its record's holder, as
// ParseRecord does: none (bucket-only), or on a held record 1 to
// MaxFollowers distinct node IDs other than the holder, with a quorum of 1
// to their number. It returns what is wrong, "" when nothing is.
func checkFollowers(holder string, followers []string, quorum int) string {
	switch {
	case len(followers) == 0 && quorum == 0:
		return ""
	case len(followers) == 0:
		return fmt.Sprintf("quorum %d without followers", quorum)
	case holder == "":
		return "followers belong on a held record only"
	case len(followers) > MaxFollowers:
		return fmt.Sprintf("%d followers, more than %d", len(followers), MaxFollowers)
	case quorum < 1 || quorum > len(followers):
		return fmt.Sprintf("quorum %d is not from 1 to the %d followers", quorum, len(followers))
	}
	for i, f := range followers {
		switch {
		case !frames.ValidNodeID(f):
			return fmt.Sprintf("follower %q is not a node ID", f)
		case f == holder:
			return fmt.Sprintf("follower %s is the holder", f)
		case slices.Contains(followers[:i], f):
			return fmt.Sprintf("follower %s is listed twice", f)
		}
	}
	return ""
}
