package fence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// ErrBadIdentity: a follower's identity record does not parse or breaks a
// rule of its format ("Follower identity" in the package documentation).
// It is damage: it matches frames.ErrDamage.
var ErrBadIdentity = frames.NewDamage("fence: bad follower identity record")

// ErrIdentityCopied: the follower store that opened is not the one that
// last opened under its ID: the bucket's record holds another generation,
// or another open wrote it first. The store is a copy (a restored backup,
// a cloned machine, a directory copied while its node ran) or a copy of it
// opened since; it must come back under a new ID (package doc, "Follower
// identity").
var ErrIdentityCopied = errors.New("fence: follower store is a copy: another store opened under its ID since")

// Identity is a follower store's identity record, followers/<id>.json: the
// generation of the store's last open, and a random tag of that open,
// which tells its write from any other (two copies write the same
// generation).
type Identity struct {
	Follower   string `json:"follower"`
	Generation uint64 `json:"generation"`
	Open       string `json:"open"`
}

// Marshal encodes the record.
func (r Identity) Marshal() []byte {
	b, _ := json.Marshal(r) // plain fields cannot fail
	return b
}

// ParseIdentity decodes an identity record read from key, strictly: the
// follower must be the one the key names, the generation 1 or more, the
// open tag 32 lowercase hex digits.
func ParseIdentity(key string, data []byte) (Identity, error) {
	fail := func(msg string) (Identity, error) {
		return Identity{}, &badObject{bad: ErrBadIdentity, key: key, msg: msg}
	}
	var raw struct {
		Follower   *string         `json:"follower"`
		Generation json.RawMessage `json:"generation"`
		Open       *string         `json:"open"`
	}
	if msg := decodeStrict(data, &raw); msg != "" {
		return fail(msg)
	}
	if raw.Follower == nil || raw.Generation == nil || raw.Open == nil {
		return fail("follower, generation and open are all required")
	}
	gen, err := parseCount(raw.Generation)
	if err != nil {
		return fail("generation " + err.Error())
	}
	r := Identity{Follower: *raw.Follower, Generation: gen, Open: *raw.Open}
	switch k, err := frames.ParseKey(key); {
	case !frames.ValidNodeID(r.Follower):
		return fail(fmt.Sprintf("follower %q is not a follower ID", r.Follower))
	case err == nil && k.Kind == frames.KeyFollower && k.Node != r.Follower:
		return fail(fmt.Sprintf("names follower %q, the key names %q", r.Follower, k.Node))
	case r.Generation == 0:
		return fail("generation 0")
	case len(r.Open) != 32 || strings.Trim(r.Open, "0123456789abcdef") != "":
		return fail(fmt.Sprintf("open %q is not 32 lowercase hex digits", r.Open))
	}
	return r, nil
}

// ReadIdentity reads and parses follower id's identity record; a missing
// record is an error matching bucket.ErrNotFound.
func ReadIdentity(ctx context.Context, b bucket.Bucket, id string) (Identity, bucket.Info, error) {
	key := frames.FollowerKey(id)
	data, info, err := readSmall(ctx, b, key, ErrBadIdentity)
	if err != nil {
		return Identity{}, info, err
	}
	r, err := ParseIdentity(key, data)
	return r, info, err
}

// OpenIdentity records an open of follower store id whose own generation
// (the one it last recorded, 0 for a store never opened so) is gen: when
// the bucket's record holds gen (or there is none and gen is 0), it
// writes generation gen+1 in a write conditional on the version it read,
// and returns it; the store then makes it its own (durably) before it
// serves. Otherwise, or when another open's write lands first, it returns
// an error matching ErrIdentityCopied, and the store takes a new ID.
//
// A crash between the write here and the store's own leaves the store one
// generation behind the record: it comes back under a new ID, which costs
// its promises (the owners replace it) and never counts one twice.
func OpenIdentity(ctx context.Context, b bucket.Bucket, id string, gen uint64) (Identity, error) {
	key := frames.FollowerKey(id)
	cur, info, err := ReadIdentity(ctx, b, id)
	cond := bucket.Condition{IfMatch: info.ETag}
	switch {
	case errors.Is(err, bucket.ErrNotFound) && gen == 0:
		cond = bucket.Condition{IfAbsent: true}
	case errors.Is(err, bucket.ErrNotFound):
		return Identity{}, fmt.Errorf("%w: %s: missing, the store is at generation %d", ErrIdentityCopied, key, gen)
	case err != nil:
		return Identity{}, fmt.Errorf("fence: reading %s: %w", key, err)
	case cur.Generation != gen:
		return Identity{}, fmt.Errorf("%w: %s: generation %d, the store is at %d", ErrIdentityCopied, key, cur.Generation, gen)
	}
	tag := make([]byte, 16)
	if _, err := rand.Read(tag); err != nil {
		return Identity{}, err
	}
	next := Identity{Follower: id, Generation: gen + 1, Open: hex.EncodeToString(tag)}
	body := next.Marshal()
	_, err = b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), cond)
	if err == nil {
		return next, nil
	}
	// No answer, or a retry's lost condition, may still mean it landed:
	// the open tag is ours alone.
	if got, _, rerr := ReadIdentity(ctx, b, id); rerr == nil && got == next {
		return next, nil
	}
	if errors.Is(err, bucket.ErrPrecondition) {
		return Identity{}, fmt.Errorf("%w: %s: another open of generation %d wrote it first", ErrIdentityCopied, key, gen)
	}
	return Identity{}, fmt.Errorf("fence: writing %s: %w", key, err)
}

// CheckIdentity reads follower id's record and says whether it is still
// mine, the record of this store's open: a node serving a store checks it
// now and then (host), and stops following once a copy opened since
// (ErrIdentityCopied).
func CheckIdentity(ctx context.Context, b bucket.Bucket, mine Identity) error {
	cur, _, err := ReadIdentity(ctx, b, mine.Follower)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		return fmt.Errorf("%w: %s: deleted", ErrIdentityCopied, frames.FollowerKey(mine.Follower))
	case err != nil:
		return err
	case cur != mine:
		return fmt.Errorf("%w: %s: generation %d written by open %s, this store opened as generation %d (%s)",
			ErrIdentityCopied, frames.FollowerKey(mine.Follower), cur.Generation, cur.Open, mine.Generation, mine.Open)
	}
	return nil
}
