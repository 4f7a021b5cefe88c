package fence

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Epoch: 1, Node: "n1", Address: "127.0.0.1:8080"},
		{Epoch: 18446744073709551615, Node: "abc-def", Address: "[::1]:1"},
		{Epoch: 7},
		{Epoch: 7, Seq: 1234, Retention: 24 * time.Hour},
		{Epoch: 8, Node: "n1", Address: "h:1", Retention: 90 * time.Second},
		{Epoch: 9, Seq: 18446744073709551615},
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
		`{"epoch":1,"node":"a","address":"h:1","seq":5}`,
		`{"epoch":1,"node":"","address":"","seq":-5}`,
		`{"epoch":1,"node":"","address":"","seq":"5"}`,
		`{"epoch":1,"node":"","address":"","seq":05}`,
		`{"epoch":1,"node":"","address":"","retention":"-1s"}`,
		`{"epoch":1,"node":"","address":"","retention":"forever"}`,
		`{"epoch":1,"node":"","address":"","retention":"1000000h"}`,
		`{"epoch":1,"node":"","address":"","retention":86400}`,
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

// Records written before seq and retention existed still parse, as 0.
func TestRecordOptionalFields(t *testing.T) {
	r, err := ParseRecord("k", []byte(`{"epoch":3,"node":"","address":""}`))
	require.NoError(t, err)
	require.Equal(t, Record{Epoch: 3}, r)
	assert.Equal(t, `{"epoch":3,"node":"","address":""}`, string((Record{Epoch: 3}).Marshal()), "a record without the optional fields marshals")
}
