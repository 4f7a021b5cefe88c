package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// countingProxy is a reverse proxy in front of the S3 server that counts
// what each replicator asks of it: requests by kind, bytes each way, and
// the moment every object write lands (for lag). Both replicators under
// comparison talk to the same server through it, one at a time, so the
// counts of a round are that round's replicator's.
//
// It forwards requests unchanged, Host header included: the clients sign
// their requests (SigV4) for the proxy's address, and the server checks
// the signature against the Host it receives.
type countingProxy struct {
	srv    *http.Server
	ln     net.Listener
	target *url.URL

	mu      sync.Mutex
	counts  requestCounts
	landed  []landing
	starts  map[string][]byte // multipart uploads: key → the first bytes of part 1
	headLen int               // how many leading body bytes of each object write to keep
}

// requestCounts are the requests the proxy saw. S3 bills a LIST like a
// PUT and a HEAD like a GET; they are kept apart here so that the table
// says what each replicator does.
type requestCounts struct {
	PUT, GET, HEAD, LIST, DELETE, POST int64
	BytesUp, BytesDown                 int64 // request bodies, response bodies
}

func (c requestCounts) sub(o requestCounts) requestCounts {
	return requestCounts{c.PUT - o.PUT, c.GET - o.GET, c.HEAD - o.HEAD, c.LIST - o.LIST, c.DELETE - o.DELETE,
		c.POST - o.POST, c.BytesUp - o.BytesUp, c.BytesDown - o.BytesDown}
}

// landing is an object write the server acknowledged: a single PUT, or
// the completion of a multipart upload.
type landing struct {
	at   time.Time // when the server's 200 was relayed to the client
	key  string    // the object key, without the bucket
	head []byte    // the object's first bytes (headLen at most)
}

// startProxy listens on a free 127.0.0.1 port and forwards to endpoint
// (host:port of the S3 server, plain HTTP).
func startProxy(endpoint string, headLen int) (*countingProxy, error) {
	target, err := url.Parse("http://" + endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, target: target, starts: map[string][]byte{}, headLen: headLen}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the signature covers Host
		},
		ModifyResponse: p.response,
		Transport:      &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		// A client that gives up on a request (framectl cancels a
		// compaction pass as it closes) is not the benchmark's error.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := p.request(r)
		sw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(sw, r)
		p.done(r, sw.status, body)
	})}
	go p.srv.Serve(ln)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *countingProxy) Addr() string { return p.ln.Addr().String() }

func (p *countingProxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

// Counts returns the counters so far.
func (p *countingProxy) Counts() requestCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Landed returns the object writes acknowledged since the i-th.
func (p *countingProxy) Landed(i int) []landing {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]landing(nil), p.landed[min(i, len(p.landed)):]...)
}

// NumLanded returns how many object writes were acknowledged so far.
func (p *countingProxy) NumLanded() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.landed)
}

// bodyHead is the request body of an object write, counted, with its
// first bytes kept (decoded from aws-chunked framing when the client
// streams a signed or checksummed body that way).
type bodyHead struct {
	r       io.ReadCloser
	p       *countingProxy
	raw     bytes.Buffer // leading raw bytes, until head is decided
	head    []byte
	decided bool
	chunked bool
}

func (b *bodyHead) Read(buf []byte) (int, error) {
	n, err := b.r.Read(buf)
	if n > 0 {
		b.p.mu.Lock()
		b.p.counts.BytesUp += int64(n)
		b.p.mu.Unlock()
		if !b.decided {
			b.raw.Write(buf[:n])
			b.decide(false)
		}
	}
	if err == io.EOF && !b.decided {
		b.decide(true)
	}
	return n, err
}

func (b *bodyHead) Close() error { return b.r.Close() }

// decide sets head once enough raw bytes are in: the first headLen bytes,
// or for aws-chunked framing ("<hex size>[;ext]\r\n<data>...") the first
// headLen bytes of the first chunk's data.
func (b *bodyHead) decide(eof bool) {
	raw := b.raw.Bytes()
	if !b.chunked {
		if len(raw) >= b.p.headLen || eof {
			b.head, b.decided = bytes.Clone(raw[:min(len(raw), b.p.headLen)]), true
		}
		return
	}
	_, rest, ok := bytes.Cut(raw, []byte("\r\n"))
	if !ok {
		if eof || len(raw) > 4096 {
			b.decided = true
		}
		return
	}
	if len(rest) >= b.p.headLen || eof {
		b.head, b.decided = bytes.Clone(rest[:min(len(rest), b.p.headLen)]), true
	}
}

// objectKey returns the key of a path-style request ("/bucket/key").
func objectKey(r *http.Request) string {
	path := strings.TrimPrefix(r.URL.Path, "/")
	_, key, _ := strings.Cut(path, "/")
	return key
}

// request counts r and wraps its body, returning the wrapper (nil without
// a body).
func (p *countingProxy) request(r *http.Request) *bodyHead {
	q := r.URL.Query()
	key := objectKey(r)
	p.mu.Lock()
	switch {
	case r.Method == http.MethodGet && (key == "" || q.Has("list-type") || q.Has("uploads")):
		p.counts.LIST++
	case r.Method == http.MethodGet:
		p.counts.GET++
	case r.Method == http.MethodHead:
		p.counts.HEAD++
	case r.Method == http.MethodPut:
		p.counts.PUT++
	case r.Method == http.MethodDelete:
		p.counts.DELETE++
	case r.Method == http.MethodPost:
		p.counts.POST++
	}
	p.mu.Unlock()
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	enc := r.Header.Get("Content-Encoding") + r.Header.Get("X-Amz-Content-Sha256")
	b := &bodyHead{r: r.Body, p: p, chunked: strings.Contains(enc, "aws-chunked") || strings.Contains(enc, "STREAMING-")}
	r.Body = b
	return b
}

// statusWriter remembers the status of the response relayed.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// done records an object write the server acknowledged, once its response
// has been relayed to the client.
func (p *countingProxy) done(r *http.Request, status int, body *bodyHead) {
	if status/100 != 2 {
		return
	}
	key := objectKey(r)
	q := r.URL.Query()
	var head []byte
	if body != nil {
		if !body.decided {
			body.decide(true)
		}
		head = body.head
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodPut && q.Has("uploadId"):
		if q.Get("partNumber") == "1" {
			p.starts[key] = head
		}
	case r.Method == http.MethodPut:
		p.landed = append(p.landed, landing{at: time.Now(), key: key, head: head})
	case r.Method == http.MethodPost && q.Has("uploadId"): // CompleteMultipartUpload
		p.landed = append(p.landed, landing{at: time.Now(), key: key, head: p.starts[key]})
		delete(p.starts, key)
	}
}

// response counts the response body.
func (p *countingProxy) response(resp *http.Response) error {
	if resp.Body != nil {
		resp.Body = &countBody{r: resp.Body, p: p}
	}
	return nil
}

type countBody struct {
	r io.ReadCloser
	p *countingProxy
}

func (b *countBody) Read(buf []byte) (int, error) {
	n, err := b.r.Read(buf)
	if n > 0 {
		b.p.mu.Lock()
		b.p.counts.BytesDown += int64(n)
		b.p.mu.Unlock()
	}
	return n, err
}

func (b *countBody) Close() error { return b.r.Close() }

// s3Endpoint returns the endpoint (host:port) of an s3:// bucket URL as
// scripts/with-s3.sh exports it, and the bucket's name.
func s3Endpoint(rawURL string) (endpoint, bucketName string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", err
	}
	if u.Scheme != "s3" || u.Query().Get("endpoint") == "" {
		return "", "", errors.New("want an s3://BUCKET/?endpoint=HOST:PORT&insecure=1 URL (scripts/with-s3.sh sets $FRAMECTL_TEST_S3)")
	}
	if u.Query().Get("insecure") != "1" {
		return "", "", errors.New("the counting proxy speaks plain HTTP: want insecure=1 (a loopback server)")
	}
	return u.Query().Get("endpoint"), u.Host, nil
}
