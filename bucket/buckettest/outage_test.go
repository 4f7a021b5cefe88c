package buckettest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/framectl/framectl/bucket"
)

// While down, every call fails with ErrOutage and changes nothing; once
// up, the inner bucket answers as before.
func TestOutageFailsEveryCallWhileDown(t *testing.T) {
	ctx := t.Context()
	inner := Dir(t)
	o := NewOutage(inner)
	if _, err := o.Put(ctx, "k/a", bytes.NewReader([]byte("a")), 1, bucket.Condition{}); err != nil {
		t.Fatal(err)
	}
	o.SetDown(true)
	calls := map[string]func() error{
		"get":        func() error { _, _, err := o.Get(ctx, "k/a"); return err },
		"put":        func() error { _, err := o.Put(ctx, "k/b", bytes.NewReader(nil), 0, bucket.Condition{}); return err },
		"stat":       func() error { _, err := o.Stat(ctx, "k/a"); return err },
		"list":       func() error { _, err := o.List(ctx, "k/", "", 0); return err },
		"delete":     func() error { return o.Delete(ctx, "k/a") },
		"deleteMany": func() error { return o.DeleteMany(ctx, []string{"k/a"}) },
	}
	for op, call := range calls {
		if err := call(); !errors.Is(err, ErrOutage) {
			t.Errorf("%s while down: %v, want ErrOutage", op, err)
		}
	}
	if got := Keys(t, inner, "k/"); len(got) != 1 || got[0] != "k/a" {
		t.Fatalf("the inner bucket after the outage holds %q, want only k/a", got)
	}
	o.SetDown(false)
	if _, err := o.Stat(ctx, "k/a"); err != nil {
		t.Fatalf("stat once up: %v", err)
	}
	if err := o.Delete(ctx, "k/a"); err != nil {
		t.Fatalf("delete once up: %v", err)
	}
	if got := Keys(t, inner, "k/"); len(got) != 0 {
		t.Fatalf("after delete the inner bucket holds %q", got)
	}
}
