package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"time"
)

// forwarder sends a request for an actor another live node holds to that
// node, once. The request carries hdrForwarded, so the holder serves it
// itself or answers 503, and never forwards it on: at most one hop, no
// loops.
//
// Whatever goes wrong on the way becomes 503 with Retry-After: 1, the
// answer that tells a caller to retry: a holder that refuses connections
// or does not answer in time is dead or paused, and stays the holder until
// its lease plus grace has run out on this node's clock and a claim here
// (or elsewhere) fences it.
type forwarder struct {
	self      string // this node's ID, the value of hdrForwarded
	transport *http.Transport
	log       *slog.Logger
}

// dialTimeout bounds connecting to a holder. A dead host's SYNs go
// unanswered; a live one on the same network accepts in milliseconds.
const dialTimeout = time.Second

// newForwarder returns a forwarder that waits at most answerTimeout for a
// holder's response headers.
func newForwarder(self string, answerTimeout time.Duration, log *slog.Logger) *forwarder {
	return &forwarder{
		self: self,
		transport: &http.Transport{
			Proxy:                 nil, // peers are reached directly, never through $HTTP_PROXY
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ResponseHeaderTimeout: answerTimeout,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       30 * time.Second,
		},
		log: log,
	}
}

// forward proxies r to the node at addr and copies its answer back.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, addr string) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = addr
			pr.Out.Host = addr
			pr.SetXForwarded()
			pr.Out.Header.Set(hdrForwarded, f.self)
		},
		Transport: f.transport,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(hdrVia, f.self)
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				resp.Header.Set("Retry-After", "1")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller left; nobody reads an answer
			}
			f.log.Debug("forwarding failed", logHolder, addr, logPath, r.URL.Path, logErr, err)
			w.Header().Set(hdrVia, f.self)
			unavailable(w, fmt.Sprintf("the actor's holder at %s does not answer: %v", addr, err))
		},
		ErrorLog: slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}
