package fence

import (
	"context"
	"errors"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// A store opens generation after generation under its ID; a copy (a store
// at an older generation, or one that never opened, under an ID the
// bucket knows) is refused with ErrIdentityCopied, and so is the second of
// two opens of one generation; the store a copy superseded learns it from
// CheckIdentity.
func TestOpenIdentity(t *testing.T) {
	ctx := context.Background()
	b, err := bucket.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const id = "9a0b1c2d3e4f5a6b"
	first, err := OpenIdentity(ctx, b, id, 0)
	if err != nil || first.Generation != 1 || first.Follower != id {
		t.Fatalf("first open: %+v, %v", first, err)
	}
	if err := CheckIdentity(ctx, b, first); err != nil {
		t.Fatalf("the record is the first open's: %v", err)
	}
	second, err := OpenIdentity(ctx, b, id, 1)
	if err != nil || second.Generation != 2 || second.Open == first.Open {
		t.Fatalf("reopen at generation 1: %+v, %v", second, err)
	}
	if err := CheckIdentity(ctx, b, first); !errors.Is(err, ErrIdentityCopied) {
		t.Fatalf("the first open after the second: %v, want ErrIdentityCopied", err)
	}
	// A copy made at generation 1 (a backup restored), and one made
	// before the store ever opened.
	for _, gen := range []uint64{1, 0, 3} {
		if _, err := OpenIdentity(ctx, b, id, gen); !errors.Is(err, ErrIdentityCopied) {
			t.Errorf("open at generation %d with the record at 2: %v, want ErrIdentityCopied", gen, err)
		}
	}
	// A record that went missing under a store that had one.
	if _, err := OpenIdentity(ctx, b, "1111111111111111", 4); !errors.Is(err, ErrIdentityCopied) {
		t.Errorf("open at generation 4 with no record: %v, want ErrIdentityCopied", err)
	}
	// Two copies of generation 2 open at once: one wins.
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := OpenIdentity(ctx, b, id, 2); errs <- err }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), ErrIdentityCopied) {
		t.Fatalf("two opens of one generation: %v and %v, want one success and one ErrIdentityCopied", e1, e2)
	}
	cur, _, err := ReadIdentity(ctx, b, id)
	if err != nil || cur.Generation != 3 {
		t.Fatalf("record after the race: %+v, %v", cur, err)
	}
	// A record that does not parse is damage, naming its key.
	if _, err := ParseIdentity(frames.FollowerKey(id), []byte(`{"follower":"1111111111111111","generation":1,"open":"00112233445566778899aabbccddeeff"}`)); !errors.Is(err, frames.ErrDamage) {
		t.Fatalf("a record naming another follower: %v", err)
	}
}
