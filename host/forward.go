package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/internal/logattr"
)

// dialTimeout bounds connecting to a holder. A dead host's SYNs go
// unanswered; a live one on the same network accepts in milliseconds.
const dialTimeout = time.Second

// newTransport is the default transport to peers: direct (never through
// $HTTP_PROXY), waiting at most answerTimeout for a holder's answer
// headers. A holder that does not answer within Lease+Grace is dead or
// paused, and about to be fenced: the caller retries meanwhile.
func newTransport(answerTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: answerTimeout,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       30 * time.Second,
	}
}

// forward sends a request for an actor held elsewhere to its holder, and
// copies the answer back. It trusts only what it must: the holder must be
// alive on this node's clock (fence's Observer), and the address it
// connects to is the one in the holder's lease, which the holder itself
// renews, never this node's own. The request carries HeaderForwarded, so
// the receiver serves it or answers 503, never forwards it on.
//
// It reports retry when it sent nothing and the claim may succeed here
// soon: the holder is going (expired, fenced, no lease) or is a
// predecessor at this node's address, or it did not accept a connection
// (then it is marked a suspect: see Host.suspect). Once the request was
// written, whatever happens is final (the holder may have run it): a
// failure is 503 with Retry-After.
func (hd *handler) forward(w http.ResponseWriter, r *http.Request, body []byte, held *fence.HeldError) (retry bool) {
	h := hd.h
	self := h.Node()
	live, lease, err := self.Observer.Judge(r.Context(), held.Node)
	switch {
	case err != nil:
		if !errors.Is(r.Context().Err(), context.Canceled) {
			h.log.Warn("cannot read a holder's lease", logattr.Holder, held.Node, logattr.Err, err)
		}
		// Answered even when the request's context was cancelled: that
		// may be the server's read deadline with the caller still there,
		// and a handler that writes nothing sends an empty 200.
		hd.unavailable(w, r, fmt.Sprintf("reading the lease of the actor's holder %s: %v", held.Node, err))
		return false
	case live != fence.Alive:
		return true
	case lease.Address == h.cfg.Address || lease.Node == self.ID():
		// Never to itself: a predecessor at this address.
		h.suspect(held.Node)
		return true
	case h.watchHolder(lease):
		// This node's failure detection suspects the holder: claim,
		// which asks the actor's followers to confirm (quorum.Suspicion).
		h.suspect(held.Node)
		return true
	}
	// A holder that stops answering mid-request (SIGSTOP, a partition)
	// would hold the request until the caller gives up: once this node
	// suspects it, the request ends (503: it was sent, so it may have
	// run), and the caller's retry claims.
	fctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var abandoned atomic.Bool
	if h.peers != nil && lease.Follower != "" {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(h.peers.node.SuspectAfter() / 5)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if h.watchHolder(lease) {
						abandoned.Store(true)
						cancel()
						return
					}
				}
			}
		}()
	}
	r = r.WithContext(fctx)
	var failed error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = lease.Address
			pr.Out.Host = lease.Address
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwarded, self.ID())
		},
		Transport: hd.opts.Transport,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(HeaderVia, self.ID())
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				resp.Header.Set("Retry-After", "1")
			}
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { failed = err },
		ErrorLog:     slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	rp.ServeHTTP(w, r)
	if failed == nil {
		return false
	}
	if abandoned.Load() {
		h.suspect(held.Node)
		h.log.Info("holder suspected while it had a request", logattr.Holder, held.Node, logattr.Address, lease.Address)
		w.Header().Set(HeaderVia, self.ID())
		hd.unavailable(w, r, fmt.Sprintf("the actor's holder %s at %s stopped answering: it is suspected gone", held.Node, lease.Address))
		return false
	}
	var op *net.OpError
	if errors.As(failed, &op) && op.Op == "dial" && r.Context().Err() == nil {
		h.log.Debug("holder does not accept connections", logattr.Holder, held.Node, logattr.Address, lease.Address, logattr.Err, failed)
		h.suspect(held.Node)
		return true
	}
	// A cancelled request is answered too (see above): never an empty 200.
	h.log.Debug("forwarding failed", logattr.Holder, held.Node, logattr.Address, lease.Address, logattr.Err, failed)
	w.Header().Set(HeaderVia, self.ID())
	hd.unavailable(w, r, fmt.Sprintf("the actor's holder %s at %s did not answer: %v", held.Node, lease.Address, failed))
	return false
}
