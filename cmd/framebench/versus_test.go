package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCommitLags: each commit's lag runs to the first write that lands
// after it and holds it; commits no write holds are counted, not given a
// lag.
func TestCommitLags(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	marks := []commitMark{{at(0), 1}, {at(10), 2}, {at(20), 3}, {at(30), 4}}
	ls := []landing{
		{at: at(5), key: "1"},  // holds commit 1
		{at: at(25), key: "2"}, // lands after commit 3 but holds only 2
		{at: at(40), key: "3"},
	}
	holds := func(l landing, c commitMark) bool { return uint64(l.key[0]-'0') >= c.seq }
	lags, unheld := commitLags(marks, ls, holds)
	want := []time.Duration{5 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond}
	if unheld != 1 || len(lags) != len(want) {
		t.Fatalf("lags %v, %d unheld; want %v and 1", lags, unheld, want)
	}
	for i := range want {
		if lags[i] != want[i] {
			t.Fatalf("lags %v, want %v", lags, want)
		}
	}
}

// TestProxyCountsAndHeads: the proxy forwards requests, counts them by
// kind and bytes, and records each object write that landed with its
// first bytes, decoding aws-chunked framing.
func TestProxyCountsAndHeads(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			io.WriteString(w, "hello")
		}
	}))
	defer srv.Close()
	p, err := startProxy(strings.TrimPrefix(srv.URL, "http://"), 8)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	do := func(method, path string, body string, hdr map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+p.Addr()+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do("PUT", "/b/plain", "0123456789abcdef", nil)
	do("PUT", "/b/chunked", "10;chunk-signature=ab\r\nFEDCBA9876543210\r\n0;chunk-signature=cd\r\n\r\n",
		map[string]string{"Content-Encoding": "aws-chunked"})
	do("GET", "/b/plain", "", nil)
	do("GET", "/b?list-type=2", "", nil)
	c := p.Counts()
	if c.PUT != 2 || c.GET != 1 || c.LIST != 1 || c.BytesDown != 10 || c.BytesUp < 16 {
		t.Fatalf("counts %+v", c)
	}
	ls := p.Landed(0)
	if len(ls) != 2 || ls[0].key != "plain" || string(ls[0].head) != "01234567" || ls[1].key != "chunked" || string(ls[1].head) != "FEDCBA98" {
		t.Fatalf("landed %+v", ls)
	}
}

// TestLTXTimestamp reads the creation time of an LTX header.
func TestLTXTimestamp(t *testing.T) {
	h := make([]byte, 100)
	copy(h, "LTX1")
	binary.BigEndian.PutUint64(h[32:], 1796130103192)
	if ts, ok := ltxTimestamp(h); !ok || ts != 1796130103192 {
		t.Fatalf("ltxTimestamp = %d, %v", ts, ok)
	}
	if _, ok := ltxTimestamp(bytes.Repeat([]byte{0}, 100)); ok {
		t.Fatal("a header without the magic was read")
	}
	if !litestreamL0("p/0000/0000000000000001-0000000000000001.ltx") || litestreamL0("p/0001/0000000000000001-0000000000000005.ltx") {
		t.Fatal("litestreamL0")
	}
}
