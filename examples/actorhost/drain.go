package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/framectl/framectl/fence"
)

// drain is the answer to SIGTERM, a handoff: stop accepting connections,
// let the requests in flight finish, close every actor (final flush, then
// release own.json, so peers claim it at once with the next epoch), then
// deregister the node. Requests that peers forward here meanwhile find the
// port closed and answer their callers 503 + Retry-After; once the release
// has landed, their next claim succeeds.
//
// Exit code: 0; 1 if an actor could not be flushed and released within
// -drain-timeout (the lease is deleted right after, and peers take the
// actor over lease + grace after they first find it missing, restoring
// what reached the bucket, which includes everything acknowledged); 3 if
// the node lost its lease while draining.
func (h *host) drain(srv *http.Server) int {
	h.log.Info("draining: no new connections; finishing requests, then releasing every actor")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.drain)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		h.log.Warn("requests still running at the drain deadline", logErr, err)
		srv.Close()
	}
	closeErr := h.closeAll(ctx)
	fenced := h.node.Err() != nil // before Close, which sets ErrClosed
	if !within(ctx, func() {
		if err := h.node.Close(ctx); err != nil {
			h.log.Warn("deregistering", logErr, err)
		}
	}) {
		closeErr = errors.Join(closeErr, errors.New("deregistering: the bucket did not answer before the drain deadline"))
	}
	h.cancel()
	if !within(ctx, h.bg.Wait) {
		closeErr = errors.Join(closeErr, errors.New("background closes still running at the drain deadline"))
	}
	switch {
	case fenced:
		h.log.Error("the node lost its lease while draining", logErr, h.node.Err())
		return exitFenced
	case closeErr != nil:
		h.log.Error("drained with errors", logErr, closeErr, logDuration, time.Since(start))
		return exitFailure
	}
	h.log.Info("drained", logDuration, time.Since(start))
	return exitOK
}

// abandon is the answer to losing the node's lease (fenced by a peer, or
// not renewed in time): the node must not serve anything more. vfs already
// refuses every acknowledgement (each database watches the node); abandon
// fails the requests in flight, drops every actor without releasing it
// (own.json is the peers' now), and the process exits non-zero so a
// supervisor restarts it, as a new node.
func (h *host) abandon(srv *http.Server) int {
	err := h.node.Err()
	h.log.Error("node no longer live: dropping every actor and exiting", logErr, err)
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	// Requests in flight fail their output gate at once (503); give them
	// a moment to say so, then cut the connections.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}()
	if err := h.closeAll(ctx); err != nil {
		h.log.Debug("closing fenced actors", logErr, err) // expected: nothing flushes after a fence
	}
	<-shut
	h.cancel()
	// Node.Close stops the renewal loop (a fenced lease stays: it is the
	// peers' evidence) and waits for it; a renewal stuck on a bucket that
	// does not answer must not keep a fenced process alive.
	within(ctx, func() { h.node.Close(ctx) })
	within(ctx, h.bg.Wait)
	if errors.Is(err, fence.ErrFenced) || errors.Is(err, fence.ErrLeaseLost) {
		return exitFenced
	}
	return exitFailure
}

// closeAll stops opening actors and closes every one: opens in progress
// are waited for, then closed too. It returns the close errors.
func (h *host) closeAll(ctx context.Context) error {
	h.mu.Lock()
	h.stopping = true
	all := make([]*actor, 0, len(h.actors))
	for _, a := range h.actors {
		all = append(all, a)
	}
	h.mu.Unlock()
	var errs []error
	for _, a := range all {
		select {
		case <-a.ready:
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			continue
		}
		h.mu.Lock()
		if a.err == nil {
			h.closeLocked(a) // no-op if closing already
		}
		h.mu.Unlock()
	}
	for _, a := range all {
		select {
		case <-a.gone:
			if a.err == nil && a.closeErr != nil {
				errs = append(errs, a.closeErr)
			}
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
		}
	}
	return errors.Join(errs...)
}

// within runs fn and waits for it until ctx ends; it reports whether fn
// returned. fn keeps running in the background otherwise: this is for the
// way out of the process, where what is left is abandoned.
func within(ctx context.Context, fn func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
