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
		{Epoch: 10, Node: "n1", Address: "h:1", Followers: []string{"n2"}, Quorum: 1},
		{Epoch: 11, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n4", "n2", "n3"}, Quorum: 2},
		{Epoch: 12, Node: "n1", Address: "h:1", Followers: []string{"f1", "f2", "f3", "f4", "f5", "f6", "f7"}, Quorum: 7},
	} {
		got, err := ParseRecord("k", r.Marshal())
		if err != nil || !got.Equal(r) {
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
		// The follower set: both or neither, only on a held record, and
		// absent (never empty) for none.
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"]}`,
		`{"epoch":1,"node":"a","address":"h:1","quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","quorum":0}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":[],"quorum":0}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":[],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":null,"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":null,"quorum":null}`,
		`{"epoch":1,"node":"","address":"","followers":["b"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":0}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":2}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":-1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":"1"}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":1.0}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":1e0}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":01}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":18446744073709551617}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":18446744073709551615}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b","c"],"quorum":9223372036854775809}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["a"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b","b"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["B"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":[""],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["-b"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":[null],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":[1],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":"b","quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["` + strings.Repeat("b", 65) + `"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b","c","d","e","f","g","h","i"],"quorum":5}`,
		`{"epoch":1,"node":"a","address":"h:1","quorum":1,"followers":["b"]}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":["b"],"quorum":1,"retention":"1h0m0s"}`,
		`{"epoch":1,"node":"a","address":"h:1","followers":[ "b"],"quorum":1}`,
		`{"epoch":1,"node":"a","address":"h:1","Followers":["b"],"quorum":1}`,
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

// The follower set's encoding: after the other fields, and none is no
// fields at all (an empty set marshals as none).
func TestRecordFollowersEncoding(t *testing.T) {
	r := Record{Epoch: 7, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n2", "n3", "n4"}, Quorum: 2}
	assert.Equal(t, `{"epoch":7,"node":"n1","address":"h:1","retention":"1h0m0s","followers":["n2","n3","n4"],"quorum":2}`, string(r.Marshal()))
	none := Record{Epoch: 7, Node: "n1", Address: "h:1", Followers: []string{}}
	assert.Equal(t, `{"epoch":7,"node":"n1","address":"h:1"}`, string(none.Marshal()), "an empty set")
	got, err := ParseRecord("k", none.Marshal())
	require.NoError(t, err)
	require.Nil(t, got.Followers, "a record without followers")
	require.Zero(t, got.Quorum, "a record without followers")
}

func TestRecordEqual(t *testing.T) {
	r := Record{Epoch: 7, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n2", "n3"}, Quorum: 2}
	same := r
	same.Followers = []string{"n2", "n3"}
	require.True(t, r.Equal(same), "a copy with its own slice")
	require.True(t, Record{Epoch: 1}.Equal(Record{Epoch: 1, Followers: []string{}}), "nil and empty sets")
	for _, other := range []Record{
		{Epoch: 8, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n2", "n3"}, Quorum: 2},
		{Epoch: 7, Node: "n9", Address: "h:1", Retention: time.Hour, Followers: []string{"n2", "n3"}, Quorum: 2},
		{Epoch: 7, Node: "n1", Address: "h:2", Retention: time.Hour, Followers: []string{"n2", "n3"}, Quorum: 2},
		{Epoch: 7, Node: "n1", Address: "h:1", Seq: 1, Retention: time.Hour, Followers: []string{"n2", "n3"}, Quorum: 2},
		{Epoch: 7, Node: "n1", Address: "h:1", Followers: []string{"n2", "n3"}, Quorum: 2},
		{Epoch: 7, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n3", "n2"}, Quorum: 2},
		{Epoch: 7, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n2"}, Quorum: 1},
		{Epoch: 7, Node: "n1", Address: "h:1", Retention: time.Hour, Followers: []string{"n2", "n3"}, Quorum: 1},
		{Epoch: 7, Node: "n1", Address: "h:1", Retention: time.Hour},
	} {
		if r.Equal(other) || other.Equal(r) {
			t.Errorf("%+v equals %+v", other, r)
		}
	}
}
