package frames

import "strconv"

// Epoch is an ownership epoch: the number a claim of an actor takes
// (own.json's "epoch"), one more than the claim it replaced. Every object a
// session writes carries its epoch, in its key and in its header; nothing
// ever writes under another epoch's prefix, and a writer whose epoch is
// older than own.json's is fenced. 0 means "no epoch": no claim was ever
// made, or the value is unset.
//
// Its text and JSON forms are those of Seq: decimal in text (String,
// MarshalText), a bare number in JSON, as own.json, leases and the CLI
// have always written epochs. In object keys it is encoded by Desc (under
// "Numbers in keys" in the package documentation), never by these methods.
type Epoch uint64

// String returns e in decimal.
func (e Epoch) String() string { return strconv.FormatUint(uint64(e), 10) }

// ParseEpoch parses an epoch in decimal, accepting only what String
// produces (as ParseSeq does).
func ParseEpoch(s string) (Epoch, error) {
	n, err := parseDecimal("epoch", s)
	return Epoch(n), err
}

// MarshalText returns e in decimal.
func (e Epoch) MarshalText() ([]byte, error) { return strconv.AppendUint(nil, uint64(e), 10), nil }

// UnmarshalText parses what MarshalText returns (ParseEpoch).
func (e *Epoch) UnmarshalText(text []byte) error {
	v, err := ParseEpoch(string(text))
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// MarshalJSON returns e as a bare JSON number.
func (e Epoch) MarshalJSON() ([]byte, error) { return e.MarshalText() }

// UnmarshalJSON parses a bare JSON number as ParseEpoch does. JSON null
// leaves e unchanged.
func (e *Epoch) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	return e.UnmarshalText(data)
}
