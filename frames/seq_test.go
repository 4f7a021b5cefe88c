package frames

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestSeqText(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range numbers(rng) {
		s := Seq(n)
		want := strconv.FormatUint(n, 10)
		if s.String() != want {
			t.Fatalf("Seq(%d).String() = %q", n, s.String())
		}
		if b, _ := s.MarshalText(); string(b) != want {
			t.Fatalf("Seq(%d).MarshalText() = %q", n, b)
		}
		if got, err := ParseSeq(want); err != nil || got != s {
			t.Fatalf("ParseSeq(%q) = %d, %v", want, got, err)
		}
		var u Seq
		if err := u.UnmarshalText([]byte(want)); err != nil || u != s {
			t.Fatalf("UnmarshalText(%q) = %d, %v", want, u, err)
		}
	}
}

func TestSeqParseStrict(t *testing.T) {
	for _, s := range []string{
		"", " ", "-1", "+1", "-0", "00", "01", " 1", "1 ", "1.0", "1e3", "0x1", "1_000", "١",
		"18446744073709551616", "99999999999999999999",
	} {
		got, err := ParseSeq(s)
		var fe *Error
		if err == nil {
			t.Errorf("ParseSeq(%q) = %d, want an error", s, got)
		} else if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Key != strconv.Quote(s) {
			t.Errorf("ParseSeq(%q): %v is not an *Error about the string matching ErrInvalid", s, err)
		}
		u := Seq(42)
		if err := u.UnmarshalText([]byte(s)); err == nil || u != 42 {
			t.Errorf("UnmarshalText(%q) = %d, %v: want an error and the value unchanged", s, u, err)
		}
	}
	if got, err := ParseSeq("18446744073709551615"); err != nil || got != math.MaxUint64 {
		t.Fatalf("ParseSeq(2^64-1) = %d, %v", got, err)
	}
}

// In JSON a Seq is a bare number, as CLI output and own.json have always
// written sequence numbers: MarshalJSON wins over MarshalText, which would
// quote it.
func TestSeqJSONIsANumber(t *testing.T) {
	type doc struct {
		S Seq  `json:"s"`
		P *Seq `json:"p,omitempty"`
		O Seq  `json:"o,omitempty"`
	}
	b, err := json.Marshal(doc{S: math.MaxUint64})
	if err != nil || string(b) != `{"s":18446744073709551615}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var d doc
	if err := json.Unmarshal([]byte(`{"s":7,"o":8}`), &d); err != nil || d.S != 7 || d.O != 8 {
		t.Fatalf("json.Unmarshal = %+v, %v", d, err)
	}
	d = doc{S: 5}
	if err := json.Unmarshal([]byte(`{"s":null}`), &d); err != nil || d.S != 5 {
		t.Fatalf("null: %+v, %v; want the value unchanged, as for a plain number", d, err)
	}
	for _, in := range []string{`{"s":"7"}`, `{"s":7.0}`, `{"s":7e0}`, `{"s":-7}`, `{"s":07}`, `{"s":18446744073709551616}`, `{"s":true}`} {
		d = doc{}
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("json.Unmarshal(%s) = %+v, want an error", in, d)
		}
	}
}
