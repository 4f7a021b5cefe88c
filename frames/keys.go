package frames

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

const hexDigits = "0123456789abcdef"

// maxAscLen is the longest encoding of a uint64: length digit + 16 digits.
const maxAscLen = 17

// appendAsc appends asc(n) to dst. asc and desc are defined under "Numbers
// in keys" in the package documentation (doc.go).
func appendAsc(dst []byte, n uint64) []byte {
	var digits [16]byte
	i := len(digits)
	for {
		i--
		digits[i] = hexDigits[n&15]
		n >>= 4
		if n == 0 {
			break
		}
	}
	dst = append(dst, hexDigits[len(digits)-i-1])
	return append(dst, digits[i:]...)
}

// appendDesc appends desc(n) to dst.
func appendDesc(dst []byte, n uint64) []byte {
	start := len(dst)
	dst = appendAsc(dst, n)
	for i := start; i < len(dst); i++ {
		dst[i] = hexDigits[15-hexValue(dst[i])]
	}
	return dst
}

// Asc returns the ascending encoding of n.
func Asc(n uint64) string { return string(appendAsc(make([]byte, 0, maxAscLen), n)) }

// Desc returns the descending encoding of n.
func Desc(n uint64) string { return string(appendDesc(make([]byte, 0, maxAscLen), n)) }

// hexValue returns the value of a lowercase hex digit, or 255.
func hexValue(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

// ParseAsc parses an ascending number, accepting only what Asc produces.
func ParseAsc(s string) (uint64, error) { return parseNumber(s, false) }

// ParseDesc parses a descending number, accepting only what Desc produces.
func ParseDesc(s string) (uint64, error) { return parseNumber(s, true) }

func parseNumber(s string, desc bool) (uint64, error) {
	fail := func(msg string) (uint64, error) {
		return 0, &Error{Object: "number", Key: strconv.Quote(s), Err: invalid(msg)}
	}
	if len(s) < 2 || len(s) > maxAscLen {
		return fail("length out of range")
	}
	digit := func(i int) byte {
		v := hexValue(s[i])
		if desc && v != 255 {
			v = 15 - v
		}
		return v
	}
	n := digit(0)
	if n == 255 {
		return fail("not lowercase hex")
	}
	if int(n)+2 != len(s) {
		return fail("length digit does not match")
	}
	if len(s) > 2 && digit(1) == 0 {
		return fail("leading zero")
	}
	var v uint64
	for i := 1; i < len(s); i++ {
		d := digit(i)
		if d == 255 {
			return fail("not lowercase hex")
		}
		v = v<<4 | uint64(d)
	}
	return v, nil
}

// namespaceLabel starts the bytes hashed into a namespace ID, so the hash
// can never collide with another use of SHA-256 over the same strings.
const namespaceLabel = "framectl namespace v1"

// NamespaceID returns the <namespace> path element for a tenant (empty by
// default) and a namespace's unique key:
//
//	base64url_nopad( SHA-256( label || be32(len(tenant)) || tenant
//	                                || be32(len(namespace)) || namespace )[:16] )
//
// where label is the 21 ASCII bytes "framectl namespace v1" and be32 is a
// 4-byte big-endian length. The length prefixes keep ("ab","c") and
// ("a","bc") apart. The result is always 22 characters of [A-Za-z0-9_-].
func NamespaceID(tenant, namespace string) string {
	h := sha256.New()
	var n [4]byte
	h.Write([]byte(namespaceLabel))
	binary.BigEndian.PutUint32(n[:], uint32(len(tenant)))
	h.Write(n[:])
	h.Write([]byte(tenant))
	binary.BigEndian.PutUint32(n[:], uint32(len(namespace)))
	h.Write(n[:])
	h.Write([]byte(namespace))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// namespaceEncoding rejects non-zero padding bits, so a namespace ID has
// exactly one spelling.
var namespaceEncoding = base64.RawURLEncoding.Strict()

func validNamespace(ns string) bool {
	if len(ns) != 22 {
		return false
	}
	var b [16]byte
	n, err := namespaceEncoding.Decode(b[:], []byte(ns))
	return err == nil && n == 16
}

// MaxActorIDBytes bounds actor IDs (and so key lengths: S3 allows 1,024).
const MaxActorIDBytes = 128

// ActorKey returns the <actor> path element for an actor ID.
func ActorKey(id []byte) string { return hex.EncodeToString(id) }

func validActor(a string) bool {
	if len(a) < 2 || len(a) > 2*MaxActorIDBytes || len(a)%2 != 0 {
		return false
	}
	for i := 0; i < len(a); i++ {
		if hexValue(a[i]) == 255 {
			return false
		}
	}
	return true
}

// MaxNodeIDLen bounds node IDs.
const MaxNodeIDLen = 64

// ValidNodeID reports whether id can name a node: 1 to 64 characters of
// [a-z0-9-], not starting with '-'.
func ValidNodeID(id string) bool {
	if len(id) == 0 || len(id) > MaxNodeIDLen || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// KeyKind says which kind of object a key names.
type KeyKind uint8

const (
	KeyOwn      KeyKind = iota + 1 // do/<ns>/<actor>/own.json
	KeyLog                         // do/<ns>/<actor>/log/<epoch>/<last seq>
	KeySnapshot                    // do/<ns>/<actor>/snapshot/<epoch>/<seq>
	KeyNode                        // nodes/<node>.json
	KeyChunk                       // do/<ns>/<actor>/chunk/<hash>
	KeyAlarm                       // alarms/<ns>/<due>/<actor>.<gen>
	KeyFollower                    // followers/<follower>.json
)

func (k KeyKind) String() string {
	switch k {
	case KeyOwn:
		return "own"
	case KeyLog:
		return "log"
	case KeySnapshot:
		return "snapshot"
	case KeyNode:
		return "node"
	case KeyChunk:
		return "chunk"
	case KeyAlarm:
		return "alarm"
	case KeyFollower:
		return "follower"
	}
	return "KeyKind(" + strconv.Itoa(int(k)) + ")"
}

// Key is a parsed object key. Fields not used by Kind are zero. The key
// layout is under "Object keys" in the package documentation (doc.go).
type Key struct {
	Kind      KeyKind
	Namespace string    // NamespaceID form
	Actor     string    // lowercase hex
	Epoch     Epoch     // KeyLog, KeySnapshot: the epoch that wrote the object
	Seq       Seq       // KeyLog: the batch's last sequence number; KeySnapshot: the one it covers through
	Node      string    // KeyNode; KeyFollower: the follower ID
	Chunk     ChunkHash // KeyChunk: the hash of the chunk's content
	Due       uint64    // KeyAlarm: when the alarm is due, Unix milliseconds
	Gen       uint64    // KeyAlarm: the generation of the actor's alarm that was set for Due
}

// Actor names one actor's objects: do/<Namespace>/<Actor>/.
type Actor struct {
	Namespace string // NamespaceID form
	Actor     string // lowercase hex
}

// Valid reports whether both elements are well formed.
func (a Actor) Valid() bool { return validNamespace(a.Namespace) && validActor(a.Actor) }

// String returns "<namespace>/<actor>", the form ParseActor reads (and the
// follower protocol carries: follow.Fence.Actor).
func (a Actor) String() string { return a.Namespace + "/" + a.Actor }

// ParseActor reads what Actor.String writes; anything else, an actor that
// is not Valid included, is an error matching ErrCorrupt.
func ParseActor(s string) (Actor, error) {
	ns, id, ok := strings.Cut(s, "/")
	a := Actor{Namespace: ns, Actor: id}
	if !ok || !a.Valid() {
		return Actor{}, fmt.Errorf("frames: %q is not <namespace>/<actor>: %w", s, ErrCorrupt)
	}
	return a, nil
}

// Prefix returns "do/<ns>/<actor>/".
func (a Actor) Prefix() string { return "do/" + a.Namespace + "/" + a.Actor + "/" }

// OwnKey returns the key of the actor's ownership record.
func (a Actor) OwnKey() string { return a.Prefix() + "own.json" }

// LogPrefix returns the prefix of every batch of the actor.
func (a Actor) LogPrefix() string { return a.Prefix() + "log/" }

// SnapshotPrefix returns the prefix of every snapshot of the actor.
func (a Actor) SnapshotPrefix() string { return a.Prefix() + "snapshot/" }

// ChunkPrefix returns the prefix of every chunk of the actor.
func (a Actor) ChunkPrefix() string { return a.Prefix() + "chunk/" }

// ChunkKey returns the key of the actor's chunk whose content has hash h.
func (a Actor) ChunkKey(h ChunkHash) string {
	return string(h.appendHex([]byte(a.ChunkPrefix())))
}

// LogSessionPrefix returns the prefix of the batches of one session: those
// epoch wrote.
func (a Actor) LogSessionPrefix(epoch Epoch) string {
	return string(appendDesc([]byte(a.LogPrefix()), uint64(epoch))) + "/"
}

// SnapshotSessionPrefix returns the prefix of the snapshots of one session:
// those epoch wrote.
func (a Actor) SnapshotSessionPrefix(epoch Epoch) string {
	return string(appendDesc([]byte(a.SnapshotPrefix()), uint64(epoch))) + "/"
}

// LogKey returns the key of epoch's batch whose last sequence number is
// last.
func (a Actor) LogKey(epoch Epoch, last Seq) string {
	return string(appendAsc([]byte(a.LogSessionPrefix(epoch)), uint64(last)))
}

// SnapshotKey returns the key of epoch's snapshot through seq.
func (a Actor) SnapshotKey(epoch Epoch, seq Seq) string {
	return string(appendDesc([]byte(a.SnapshotSessionPrefix(epoch)), uint64(seq)))
}

// NodesPrefix is the prefix of every node lease.
const NodesPrefix = "nodes/"

// NodeKey returns the key of a node's lease. id must satisfy ValidNodeID.
func NodeKey(id string) string { return NodesPrefix + id + ".json" }

// FollowersPrefix is the prefix of every follower store's identity record.
const FollowersPrefix = "followers/"

// FollowerKey returns the key of a follower store's identity record (package
// fence). id must satisfy ValidNodeID.
func FollowerKey(id string) string { return FollowersPrefix + id + ".json" }

// AlarmsPrefix is the prefix of every namespace's alarm index.
const AlarmsPrefix = "alarms/"

// AlarmIndexPrefix returns "alarms/<ns>/", the prefix of one namespace's
// alarm index (NamespaceID form). A listing of it is in due order.
func AlarmIndexPrefix(namespace string) string { return AlarmsPrefix + namespace + "/" }

// AlarmDueAfter returns a start-after key for a listing of a namespace's
// alarm index: the listing returns the entries due at or after due (Unix
// milliseconds), in due order.
func AlarmDueAfter(namespace string, due uint64) string {
	return string(appendAsc([]byte(AlarmIndexPrefix(namespace)), due)) + "/"
}

// AlarmKey returns the key of the alarm index entry of the actor's alarm
// of generation gen, due at due (Unix milliseconds).
func (a Actor) AlarmKey(due, gen uint64) string {
	k := append([]byte(AlarmDueAfter(a.Namespace, due)), a.Actor...)
	return string(appendAsc(append(k, '.'), gen))
}

// String re-encodes the key.
func (k Key) String() string {
	a := Actor{Namespace: k.Namespace, Actor: k.Actor}
	switch k.Kind {
	case KeyOwn:
		return a.OwnKey()
	case KeyLog:
		return a.LogKey(k.Epoch, k.Seq)
	case KeySnapshot:
		return a.SnapshotKey(k.Epoch, k.Seq)
	case KeyNode:
		return NodeKey(k.Node)
	case KeyFollower:
		return FollowerKey(k.Node)
	case KeyChunk:
		return a.ChunkKey(k.Chunk)
	case KeyAlarm:
		return a.AlarmKey(k.Due, k.Gen)
	}
	return ""
}

// ActorOf returns the actor a key belongs to (zero for node keys). An
// alarm index entry belongs to the actor whose alarm it indexes, but it is
// not one of the actor's objects: those are under Actor.Prefix.
func (k Key) ActorOf() Actor { return Actor{Namespace: k.Namespace, Actor: k.Actor} }

// ParseKey parses an object key, accepting only keys the encoder produces.
func ParseKey(s string) (Key, error) {
	fail := func(msg string) (Key, error) {
		return Key{}, &Error{Object: "key", Key: strconv.Quote(s), Err: invalid(msg)}
	}
	if rest, ok := strings.CutPrefix(s, NodesPrefix); ok {
		id, ok := strings.CutSuffix(rest, ".json")
		if !ok || !ValidNodeID(id) {
			return fail("not nodes/<node>.json with a valid node ID")
		}
		return Key{Kind: KeyNode, Node: id}, nil
	}
	if rest, ok := strings.CutPrefix(s, FollowersPrefix); ok {
		id, ok := strings.CutSuffix(rest, ".json")
		if !ok || !ValidNodeID(id) {
			return fail("not followers/<follower>.json with a valid follower ID")
		}
		return Key{Kind: KeyFollower, Node: id}, nil
	}
	if rest, ok := strings.CutPrefix(s, AlarmsPrefix); ok {
		return parseAlarmKey(rest, fail)
	}
	parts := strings.Split(s, "/")
	if len(parts) < 4 || parts[0] != "do" {
		return fail("not under do/<namespace>/<actor>/, nodes/, followers/ or alarms/")
	}
	k := Key{Namespace: parts[1], Actor: parts[2]}
	if !validNamespace(k.Namespace) {
		return fail("bad namespace element")
	}
	if !validActor(k.Actor) {
		return fail("bad actor element")
	}
	switch {
	case len(parts) == 4 && parts[3] == "own.json":
		k.Kind = KeyOwn
		return k, nil
	case len(parts) == 5 && parts[3] == "chunk":
		h, err := ParseChunkHash(parts[4])
		if err != nil {
			return fail("bad chunk hash")
		}
		k.Kind, k.Chunk = KeyChunk, h
		return k, nil
	case len(parts) == 6 && (parts[3] == "log" || parts[3] == "snapshot"):
		epoch, err := ParseDesc(parts[4])
		if err != nil {
			return fail("bad epoch number")
		}
		k.Epoch = Epoch(epoch)
		var seq uint64
		if parts[3] == "log" {
			k.Kind = KeyLog
			seq, err = ParseAsc(parts[5])
		} else {
			k.Kind = KeySnapshot
			seq, err = ParseDesc(parts[5])
		}
		if err != nil {
			return fail("bad sequence number")
		}
		k.Seq = Seq(seq)
		return k, nil
	}
	return fail("unknown object under the actor")
}

// parseAlarmKey parses what follows "alarms/": <ns>/<due>/<actor>.<gen>.
func parseAlarmKey(rest string, fail func(string) (Key, error)) (Key, error) {
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return fail("not alarms/<namespace>/<due>/<actor>.<gen>")
	}
	k := Key{Kind: KeyAlarm, Namespace: parts[0]}
	if !validNamespace(k.Namespace) {
		return fail("bad namespace element")
	}
	var err error
	if k.Due, err = ParseAsc(parts[1]); err != nil {
		return fail("bad due time")
	}
	// The actor is hex, so the first '.' ends it.
	actor, gen, ok := strings.Cut(parts[2], ".")
	if !ok || !validActor(actor) {
		return fail("bad actor element")
	}
	k.Actor = actor
	if k.Gen, err = ParseAsc(gen); err != nil {
		return fail("bad alarm generation")
	}
	return k, nil
}
