package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/logattr"
)

// Headers of forwarded requests and their answers.
const (
	// HeaderForwarded marks a request one node forwarded to another; its
	// value is the forwarder's node ID. The receiver serves it or answers
	// 503, and never forwards it again.
	HeaderForwarded = "Framectl-Forwarded"
	// HeaderVia is set on the answer to a forwarded request: the ID of the
	// node that forwarded it.
	HeaderVia = "Framectl-Via"
)

// Defaults for HandlerOptions' zero fields.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultBodyTimeout    = 10 * time.Second
	DefaultMaxBodyBytes   = 1 << 20
)

// HandlerOptions configure Host.Handler. Route and Serve are required.
type HandlerOptions struct {
	// Route names the actor a request is for. An error is answered 400.
	Route func(r *http.Request) (namespace string, actor []byte, err error)
	// Serve answers a request with the actor acquired on this node; the
	// Handle is released when Serve returns. Hold the reply until
	// DB.Durable returns nil (the output gate). The request's body has
	// been read already (r.Body replays it) and its context ends at the
	// request's deadline.
	Serve func(w http.ResponseWriter, r *http.Request, a *Handle)
	// Error writes an answer the handler gives itself: 400 (Route's
	// error), 408 (the body did not arrive in time), 413 (body too large),
	// 503 (try again; Retry-After is set already). Default: text/plain.
	Error func(w http.ResponseWriter, r *http.Request, status int, msg string)
	// RequestTimeout bounds a request from its arrival to the end of its
	// answer: reading the body, acquiring the actor (claim retries
	// included), serving or forwarding it, writing the answer (default
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
	// BodyTimeout bounds reading the body, which happens before the actor
	// is acquired (default DefaultBodyTimeout).
	BodyTimeout time.Duration
	// MaxBodyBytes bounds a body (default DefaultMaxBodyBytes); larger
	// ones are answered 413 without acquiring the actor.
	MaxBodyBytes int64
	// Transport carries forwarded requests (default: direct connections,
	// never through a proxy, a 1 s dial timeout and Lease+Grace to wait
	// for the holder's answer headers).
	Transport http.RoundTripper
}

// Handler returns an http.Handler that serves each request for an actor
// where it belongs: on this node if it holds (or can claim) the actor, on
// the live node that holds it otherwise, forwarded at most once (see
// forward). Everything that asks the caller to try again is 503 with
// Retry-After: 1.
func (h *Host) Handler(opts HandlerOptions) http.Handler {
	if opts.Route == nil || opts.Serve == nil {
		panic("host: HandlerOptions.Route and Serve are required")
	}
	if opts.Error == nil {
		opts.Error = func(w http.ResponseWriter, _ *http.Request, status int, msg string) { http.Error(w, msg, status) }
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Transport == nil {
		opts.Transport = newTransport(h.cfg.Lease + h.cfg.Grace)
	}
	return &handler{h: h, opts: opts}
}

type handler struct {
	h    *Host
	opts HandlerOptions
}

func (hd *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, id, err := hd.opts.Route(r)
	if err != nil {
		hd.opts.Error(w, r, http.StatusBadRequest, err.Error())
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), hd.opts.RequestTimeout)
	defer cancel()
	// Connection deadlines, so that neither a slow upload nor a slow
	// reader of the answer outlasts the request; ErrNotSupported (HTTP/2,
	// a wrapped writer) leaves the context's deadline as the bound.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(start.Add(min(hd.opts.BodyTimeout, hd.opts.RequestTimeout)))
	rc.SetWriteDeadline(start.Add(hd.opts.RequestTimeout))
	body, status, err := readBody(r, hd.opts.MaxBodyBytes)
	if err != nil {
		hd.opts.Error(w, r, status, err.Error())
		return
	}
	// The body's deadline ends with it. Left on the connection, it fails
	// net/http's background read (which watches for the caller leaving,
	// from the end of the body on, or from the start for a request
	// without one), and that cancels the request: a request waiting past
	// BodyTimeout for its claim or its Durable would end unanswered.
	rc.SetReadDeadline(start.Add(hd.opts.RequestTimeout))
	r = r.WithContext(ctx)
	delay := retryMin
	for {
		a, err := hd.h.Acquire(ctx, ns, id)
		if err == nil {
			defer a.Release()
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			hd.opts.Serve(w, r, a)
			return
		}
		var held *fence.HeldError
		if !errors.As(err, &held) {
			hd.notHere(w, r, ns, id, err)
			return
		}
		if r.Header.Get(HeaderForwarded) != "" {
			// The forwarder thought this node holds it; it thinks another
			// does. Forwarding on could loop: the caller retries.
			hd.unavailable(w, r, fmt.Sprintf("forwarded here, but held by node %s (epoch %d)", held.Node, held.Epoch))
			return
		}
		if !hd.forward(w, r, body, held) {
			return
		}
		// The holder is going (its lease expired or vanished) or did not
		// accept a connection: claim it here once its lease has run out.
		select {
		case <-ctx.Done():
			hd.notHere(w, r, ns, id, ctx.Err())
			return
		case <-time.After(delay):
		}
		delay = hd.h.nextRetry(held, delay)
	}
}

// readBody reads the whole body, at most max bytes, before the actor is
// acquired: a client that uploads slowly holds nothing but its
// connection. It returns the status to answer on failure.
func readBody(r *http.Request, max int64) ([]byte, int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, max))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return body, 0, nil
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is larger than %d bytes", max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, http.StatusRequestTimeout, errors.New("the body did not arrive in time")
	}
	return nil, http.StatusBadRequest, fmt.Errorf("reading the body: %w", err)
}

// notHere answers a request for an actor this node could not acquire.
func (hd *handler) notHere(w http.ResponseWriter, r *http.Request, ns string, id []byte, err error) {
	// Answered even when the request's context was cancelled: that may be
	// the server's read deadline with the caller still there, and a
	// handler that writes nothing sends an empty 200.
	left := errors.Is(r.Context().Err(), context.Canceled)
	switch {
	case left:
	case errors.Is(err, ErrBadActorID):
		hd.opts.Error(w, r, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, fence.ErrHolderUnseen), errors.Is(err, ErrStopped), errors.Is(err, ErrLocked),
		errors.Is(err, ErrDraining):
		// Expected. A draining node holds nothing it could claim: the
		// caller's retry, through a node that is not draining, claims
		// it there.
	default:
		// The bucket is unreachable, a restore failed: nothing the caller
		// did, and it may pass.
		hd.h.log.Warn("cannot acquire actor", logattr.Namespace, ns, logattr.Actor, frames.ActorKey(id), logattr.Err, err)
	}
	hd.unavailable(w, r, err.Error())
}

// unavailable answers 503 with Retry-After: 1, the answer to retry.
func (hd *handler) unavailable(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", "1")
	hd.opts.Error(w, r, http.StatusServiceUnavailable, msg)
}
