package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/framectl/framectl/fence"
)

// drain is the answer to SIGTERM, a handoff (host.Drain): stop claiming
// actors (a request for one this node does not hold is forwarded to its
// holder, or answered 503 if nobody holds it), stop accepting connections,
// let the requests in flight finish, then drain: every actor closed (final
// flush, then own.json released, so peers claim it at once with the next
// epoch) and the node deregistered. This runtime keeps nothing in memory,
// so it has no drain hooks. Requests that peers forward here meanwhile find
// the port closed; the peers retry their claim and serve the actor
// themselves as soon as the release has landed.
//
// Exit code: 0; 1 if an actor could not be flushed and released within
// -drain-timeout (the lease is deleted right after, and peers take the
// actor over lease + grace after they first find it missing, restoring
// what reached the bucket, which includes everything acknowledged); 3 if
// the node was lost while draining.
func (s *server) drain(srv *http.Server) int {
	s.log.Info("draining: claiming nothing, no new connections; finishing requests, then releasing every actor")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.drain)
	defer cancel()
	s.host.StopClaiming()
	if err := srv.Shutdown(ctx); err != nil {
		s.log.Warn("requests still running at the drain deadline", logErr, err)
		srv.Close()
	}
	_, err := s.host.Drain(ctx) // the host logs what the hooks did: none here
	switch {
	case errors.Is(err, fence.ErrFenced), errors.Is(err, fence.ErrLeaseLost):
		s.log.Error("the node was lost while draining", logErr, err)
		return exitFenced
	case err != nil:
		s.log.Error("drained with errors", logErr, err, logDuration, time.Since(start))
		return exitFailure
	}
	s.log.Info("drained", logDuration, time.Since(start))
	return exitOK
}

// abandon is the answer to losing the node with -recover=false (fenced by
// a peer, or its lease not renewed in time): the node must not serve
// anything more. The session already refuses every acknowledgement; abandon fails
// the requests in flight, lets the host close every actor without
// releasing it (own.json is the peers' now), and the process exits 3 so a
// supervisor restarts it, as a new node.
func (s *server) abandon(srv *http.Server) int {
	err := s.host.Err()
	s.log.Error("node no longer live: dropping every actor and exiting", logErr, err)
	// Requests in flight fail their output gate at once (503); give them
	// a moment to say so, then cut the connections. A close stuck on a
	// bucket that does not answer must not keep a fenced process alive.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
	defer ccancel()
	if cerr := s.host.Close(cctx); cerr != nil {
		s.log.Debug("closing fenced actors", logErr, cerr) // expected: nothing flushes after a fence
	}
	if errors.Is(err, fence.ErrFenced) || errors.Is(err, fence.ErrLeaseLost) {
		return exitFenced
	}
	return exitFailure
}
