package frames

import "strconv"

// Seq is a commit's sequence number. Sequence numbers are per actor and
// strictly increasing across sessions: each commit is one, the first is 1,
// and 0 means "before the first commit". A frame covers a range of them
// (Frame.FirstSeq..LastSeq), a batch is keyed by its last, a snapshot by
// the one it covers through.
//
// In text (String, MarshalText) a Seq is decimal; in JSON it is a bare
// number, as the CLI and own.json have always written it. In object keys it
// is encoded by Asc or Desc (under "Numbers in keys" in the package
// documentation), never by these methods.
type Seq uint64

// String returns s in decimal.
func (s Seq) String() string { return strconv.FormatUint(uint64(s), 10) }

// ParseSeq parses a sequence number in decimal, accepting only what String
// produces: digits only (no sign, no spaces), no leading zero except "0"
// itself, at most 2^64-1.
func ParseSeq(s string) (Seq, error) {
	n, err := parseDecimal("sequence number", s)
	return Seq(n), err
}

// parseDecimal parses the decimal text of a number of the kind what names
// (Seq, Epoch): digits only, no leading zero except "0" itself, at most
// 2^64-1.
func parseDecimal(what, s string) (uint64, error) {
	fail := func(msg string) (uint64, error) {
		return 0, &Error{Object: what, Key: strconv.Quote(s), Err: invalid(msg)}
	}
	if s == "" {
		return fail("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return fail("not decimal digits")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return fail("leading zero")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fail("more than 2^64-1")
	}
	return n, nil
}

// MarshalText returns s in decimal.
func (s Seq) MarshalText() ([]byte, error) { return strconv.AppendUint(nil, uint64(s), 10), nil }

// UnmarshalText parses what MarshalText returns (ParseSeq).
func (s *Seq) UnmarshalText(text []byte) error {
	v, err := ParseSeq(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalJSON returns s as a bare JSON number. It takes precedence over
// MarshalText in encoding/json, which would otherwise quote it.
func (s Seq) MarshalJSON() ([]byte, error) { return s.MarshalText() }

// UnmarshalJSON parses a bare JSON number as ParseSeq does (no fraction,
// exponent or sign). JSON null leaves s unchanged, as encoding/json does
// for plain numbers.
func (s *Seq) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	return s.UnmarshalText(data)
}
