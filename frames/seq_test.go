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

// Seq and Epoch share one text and JSON form: decimal digits, a bare JSON
// number. Each test runs over both.

// decimal is Seq or Epoch.
type decimal interface {
	~uint64
	String() string
	MarshalText() ([]byte, error)
}

// decimalPtr is *Seq or *Epoch.
type decimalPtr[T decimal] interface {
	*T
	UnmarshalText([]byte) error
	UnmarshalJSON([]byte) error
}

func TestSeqText(t *testing.T)   { testDecimalText[Seq](t, ParseSeq) }
func TestEpochText(t *testing.T) { testDecimalText[Epoch](t, ParseEpoch) }

func testDecimalText[T decimal, P decimalPtr[T]](t *testing.T, parse func(string) (T, error)) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range numbers(rng) {
		s := T(n)
		want := strconv.FormatUint(n, 10)
		require.Equal(t, want, s.String(), "%T(%d).String()", s, n)
		b, _ := s.MarshalText()
		require.Equal(t, want, string(b), "%T(%d).MarshalText()", s, n)
		got, err := parse(want)
		require.NoError(t, err, "parse(%q)", want)
		require.Equal(t, s, got, "parse(%q)", want)
		var u T
		require.NoError(t, P(&u).UnmarshalText([]byte(want)), "UnmarshalText(%q)", want)
		require.Equal(t, s, u, "UnmarshalText(%q)", want)
	}
}

func TestSeqParseStrict(t *testing.T)   { testDecimalParseStrict[Seq](t, ParseSeq) }
func TestEpochParseStrict(t *testing.T) { testDecimalParseStrict[Epoch](t, ParseEpoch) }

func testDecimalParseStrict[T decimal, P decimalPtr[T]](t *testing.T, parse func(string) (T, error)) {
	for _, s := range []string{
		"", " ", "-1", "+1", "-0", "00", "01", " 1", "1 ", "1.0", "1e3", "0x1", "1_000", "١",
		"18446744073709551616", "99999999999999999999",
	} {
		got, err := parse(s)
		var fe *Error
		if err == nil {
			t.Errorf("parse(%q) = %d, want an error", s, got)
		} else if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Key != strconv.Quote(s) {
			t.Errorf("parse(%q): %v is not an *Error about the string matching ErrInvalid", s, err)
		}
		u := T(42)
		assert.Error(t, P(&u).UnmarshalText([]byte(s)), "UnmarshalText(%q)", s)
		assert.Equal(t, T(42), u, "UnmarshalText(%q) leaves the value unchanged", s)
	}
	got, err := parse("18446744073709551615")
	require.NoError(t, err, "parse(2^64-1)")
	require.Equal(t, T(uint64(math.MaxUint64)), got, "parse(2^64-1)")
}

// In JSON a Seq or an Epoch is a bare number, as CLI output and own.json
// have always written them: MarshalJSON wins over MarshalText, which would
// quote it.
func TestSeqJSONIsANumber(t *testing.T)   { testDecimalJSON[Seq](t) }
func TestEpochJSONIsANumber(t *testing.T) { testDecimalJSON[Epoch](t) }

func testDecimalJSON[T decimal, P decimalPtr[T]](t *testing.T) {
	type doc struct {
		S T  `json:"s"`
		P *T `json:"p,omitempty"`
		O T  `json:"o,omitempty"`
	}
	b, err := json.Marshal(doc{S: T(uint64(math.MaxUint64))})
	require.NoError(t, err, "json.Marshal")
	require.Equal(t, `{"s":18446744073709551615}`, string(b), "json.Marshal")
	var d doc
	require.NoError(t, json.Unmarshal([]byte(`{"s":7,"o":8}`), &d), "json.Unmarshal = %+v", d)
	require.Equal(t, T(7), d.S, "json.Unmarshal = %+v", d)
	require.Equal(t, T(8), d.O, "json.Unmarshal = %+v", d)
	d = doc{S: 5}
	require.NoError(t, json.Unmarshal([]byte(`{"s":null}`), &d), "null")
	require.Equal(t, T(5), d.S, "null leaves the value unchanged, as for a plain number")
	for _, in := range []string{`{"s":"7"}`, `{"s":7.0}`, `{"s":7e0}`, `{"s":-7}`, `{"s":07}`, `{"s":18446744073709551616}`, `{"s":true}`} {
		d = doc{}
		assert.Error(t, json.Unmarshal([]byte(in), &d), "json.Unmarshal(%s) = %+v, want an error", in, d)
	}
}
