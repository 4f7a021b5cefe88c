package frames

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

// The sentinels of damage match ErrDamage and keep their own text and
// identity; ErrInvalid is no damage. Damaged marks an error as damage
// without changing its message or what else it matches.
func TestErrDamage(t *testing.T) {
	for _, s := range []error{ErrCorrupt, ErrTruncated, ErrTooLarge, ErrUnknownKind, &KeyMismatchError{},
		&Error{Object: "batch", Key: "k", Err: ErrTruncated}, corruptCause("x", io.ErrUnexpectedEOF)} {
		if !errors.Is(s, ErrDamage) {
			t.Errorf("%v does not match ErrDamage", s)
		}
	}
	if errors.Is(ErrInvalid, ErrDamage) || errors.Is(&Error{Object: "key", Key: "k", Err: ErrInvalid}, ErrDamage) {
		t.Error("ErrInvalid matches ErrDamage")
	}
	if ErrCorrupt.Error() != "corrupt" || errors.Is(ErrCorrupt, ErrTruncated) {
		t.Errorf("ErrCorrupt: %q, or it matches ErrTruncated", ErrCorrupt)
	}
	cause := fmt.Errorf("get k: %w", io.ErrUnexpectedEOF)
	d := Damaged(cause)
	if d.Error() != cause.Error() || !errors.Is(d, ErrDamage) || !errors.Is(d, io.ErrUnexpectedEOF) {
		t.Errorf("Damaged(%v) = %v", cause, d)
	}
	if Damaged(nil) != nil || Damaged(ErrCorrupt) != ErrCorrupt {
		t.Error("Damaged(nil) or Damaged of damage changed it")
	}
	if NewDamage("gap").Error() != "gap" {
		t.Errorf("NewDamage: %q", NewDamage("gap"))
	}
}

// keyed is a KeyPrinter of another package, as PrintsKey sees it.
type keyed struct {
	key string
	err error
}

func (k *keyed) Error() string             { return k.key + ": " + k.err.Error() }
func (k *keyed) Unwrap() error             { return k.err }
func (k *keyed) PrintsKey(key string) bool { return key == k.key }

// PrintsKey finds a key printed anywhere in the tree of wrapped errors,
// through fmt.Errorf, errors.Join and multiple %w, and never an empty key.
func TestPrintsKey(t *testing.T) {
	fe := &Error{Object: "batch", Key: "a", Err: ErrCorrupt}
	for _, c := range []struct {
		err  error
		key  string
		want bool
	}{
		{fe, "a", true},
		{fe, "b", false},
		{fe, "", false},
		{&Error{Object: "batch", Err: ErrCorrupt}, "", false},
		{fmt.Errorf("reading: %w", fe), "a", true},
		{&keyed{"b", fe}, "a", true},
		{&keyed{"b", fe}, "b", true},
		{errors.Join(io.EOF, &keyed{"c", io.EOF}), "c", true},
		{fmt.Errorf("%w, then %w", io.EOF, Damaged(fe)), "a", true},
		{fmt.Errorf("reading a: %v", fe), "a", false}, // text only: not known
		{ErrCorrupt, "corrupt", false},
		{nil, "a", false},
	} {
		if got := PrintsKey(c.err, c.key); got != c.want {
			t.Errorf("PrintsKey(%v, %q) = %v, want %v", c.err, c.key, got, c.want)
		}
	}
}
