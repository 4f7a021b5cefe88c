package frames

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeqText(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range numbers(rng) {
		s := Seq(n)
		want := strconv.FormatUint(n, 10)
		require.Equal(t, want, s.String(), "Seq(%d).String()", n)
		b, _ := s.MarshalText()
		require.Equal(t, want, string(b), "Seq(%d).MarshalText()", n)
		got, err := ParseSeq(want)
		require.NoError(t, err, "ParseSeq(%q)", want)
		require.Equal(t, s, got, "ParseSeq(%q)", want)
		var u Seq
		require.NoError(t, u.UnmarshalText([]byte(want)), "UnmarshalText(%q)", want)
		require.Equal(t, s, u, "UnmarshalText(%q)", want)
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
		assert.Error(t, u.UnmarshalText([]byte(s)), "UnmarshalText(%q)", s)
		assert.Equal(t, Seq(42), u, "UnmarshalText(%q) leaves the value unchanged", s)
	}
	got, err := ParseSeq("18446744073709551615")
	require.NoError(t, err, "ParseSeq(2^64-1)")
	require.Equal(t, Seq(math.MaxUint64), got, "ParseSeq(2^64-1)")
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
	require.NoError(t, err, "json.Marshal")
	require.Equal(t, `{"s":18446744073709551615}`, string(b), "json.Marshal")
	var d doc
	require.NoError(t, json.Unmarshal([]byte(`{"s":7,"o":8}`), &d), "json.Unmarshal = %+v", d)
	require.Equal(t, Seq(7), d.S, "json.Unmarshal = %+v", d)
	require.Equal(t, Seq(8), d.O, "json.Unmarshal = %+v", d)
	d = doc{S: 5}
	require.NoError(t, json.Unmarshal([]byte(`{"s":null}`), &d), "null")
	require.Equal(t, Seq(5), d.S, "null leaves the value unchanged, as for a plain number")
	for _, in := range []string{`{"s":"7"}`, `{"s":7.0}`, `{"s":7e0}`, `{"s":-7}`, `{"s":07}`, `{"s":18446744073709551616}`, `{"s":true}`} {
		d = doc{}
		assert.Error(t, json.Unmarshal([]byte(in), &d), "json.Unmarshal(%s) = %+v, want an error", in, d)
	}
}
