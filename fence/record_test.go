package fence

import (
	"errors"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Epoch: 1, Node: "n1", Address: "127.0.0.1:8080"},
		{Epoch: 18446744073709551615, Node: "abc-def", Address: "[::1]:1"},
		{Epoch: 7},
	} {
		got, err := ParseRecord("k", r.Marshal())
		if err != nil || got != r {
			t.Fatalf("%+v: %+v, %v", r, got, err)
		}
	}
	if !(Record{Epoch: 3}).Released() || (Record{Epoch: 3, Node: "a", Address: "h:1"}).Released() {
		t.Fatal("Released")
	}
}

func TestBadRecordsRejected(t *testing.T) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"epoch":1,"node":"a"}`,
		`{"epoch":0,"node":"","address":""}`,
		`{"epoch":-1,"node":"","address":""}`,
		`{"epoch":1.5,"node":"","address":""}`,
		`{"epoch":18446744073709551616,"node":"","address":""}`,
		`{"epoch":1,"node":"","address":"h:1"}`,
		`{"epoch":1,"node":"A","address":"h:1"}`,
		`{"epoch":1,"node":"a","address":"nohost"}`,
		`{"epoch":1,"node":"a","address":"h:"}`,
		`{"epoch":1,"node":"","address":"","x":1}`,
		`{"epoch":1,"node":"","address":""} {}`,
		`{"epoch":1,"node":"","address":""}x`,
		`{"epoch":1,"node":"","address":""`,
		`{"epoch":"1","node":"","address":""}`,
		`{"epoch":1,"node":"","address":""}` + strings.Repeat(" ", MaxRecordBytes),
	} {
		r, err := ParseRecord("do/x/own.json", []byte(s))
		if err == nil {
			t.Errorf("%q parsed as %+v", s, r)
			continue
		}
		if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "do/x/own.json") {
			t.Errorf("%q: %v", s, err)
		}
	}
}
