package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/vfs"
)

// Response headers. Every answer an actor gives names the node that
// executed it and the ownership epoch it ran in: no two nodes may ever
// answer for one actor in the same epoch (the tests check it).
const (
	hdrNode  = "X-Node"
	hdrEpoch = "X-Actor-Epoch"
	// hdrForwarded marks a request one node forwarded to another (its
	// value is the forwarder's node ID): the receiver serves it or answers
	// 503, and never forwards it again.
	hdrForwarded = "X-Actorhost-Forwarded"
	// hdrVia is set on a forwarded request's answer: the node that
	// forwarded it.
	hdrVia = "X-Actorhost-Via"
)

// maxNoteBytes bounds a note's body.
const maxNoteBytes = 1 << 20

// namespacePattern: a namespace is also a directory name under -data.
var namespacePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (h *host) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /actor/{ns}/{id}/notes", h.actorHandler(addNote))
	mux.HandleFunc("GET /actor/{ns}/{id}/notes", h.actorHandler(listNotes))
	mux.HandleFunc("POST /actor/{ns}/{id}/counter", h.actorHandler(increment))
	mux.HandleFunc("GET /status", h.status)
	return mux
}

// operation runs one request against an open actor and returns the value
// to answer with. It does not wait for the bucket: the handler does, for
// every operation (the output gate).
type operation func(ctx context.Context, r *http.Request, d *actorDB) (any, error)

func addNote(ctx context.Context, r *http.Request, d *actorDB) (any, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxNoteBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("a note is at most %d bytes", maxNoteBytes)}
		}
		return nil, &statusError{http.StatusBadRequest, "reading the body: " + err.Error()}
	}
	if !utf8.Valid(body) {
		return nil, &statusError{http.StatusBadRequest, "a note is UTF-8 text"}
	}
	id, err := d.addNote(ctx, string(body))
	if err != nil {
		return nil, err
	}
	return map[string]int64{"id": id}, nil
}

func listNotes(ctx context.Context, _ *http.Request, d *actorDB) (any, error) {
	return d.notes(ctx)
}

func increment(ctx context.Context, _ *http.Request, d *actorDB) (any, error) {
	v, err := d.increment(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]int64{"value": v}, nil
}

// statusError is a failure the client caused.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// actorHandler serves one operation: find the actor (open it here, or
// forward to its holder), run the operation, wait until everything the
// actor committed so far is in the bucket, then answer. Reads wait too: a
// read may show another request's write that is not durable yet, and must
// not be answered before that write is.
func (h *host) actorHandler(op operation) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := parseActorKey(r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		// A node past its lease answers nothing, not even from an actor
		// it still has open.
		if err := h.node.Valid(); err != nil {
			unavailable(w, "this node is no longer live: "+err.Error())
			return
		}
		ctx := r.Context()
		a, err := h.acquire(ctx, key)
		if err != nil {
			h.notHere(w, r, key, err)
			return
		}
		defer h.release(a)
		d := a.db
		v, err := op(ctx, r, d)
		if err != nil {
			var se *statusError
			switch {
			case errors.As(err, &se):
				writeError(w, se.status, se.msg)
			case d.stopped() != nil:
				h.drop(a, d.stopped())
				unavailable(w, "the actor's database stopped: "+d.stopped().Error())
			case ctx.Err() != nil:
				unavailable(w, ctx.Err().Error())
			default:
				h.log.Error("operation failed", logNamespace, key.ns, logActor, key.id, logErr, err)
				writeError(w, http.StatusInternalServerError, err.Error())
			}
			return
		}
		// The output gate.
		if err := d.vfs.Durable(ctx); err != nil {
			if errors.Is(err, vfs.ErrFenced) || d.stopped() != nil {
				h.drop(a, err)
			}
			unavailable(w, "not acknowledged: "+err.Error())
			return
		}
		w.Header().Set(hdrNode, h.node.ID())
		w.Header().Set(hdrEpoch, strconv.FormatUint(d.epoch, 10))
		writeJSON(w, http.StatusOK, v)
	}
}

// notHere answers a request for an actor this node could not open: held
// by another live node (forward it there, once), or not available now.
func (h *host) notHere(w http.ResponseWriter, r *http.Request, key actorKey, err error) {
	var held *fence.HeldError
	switch {
	case errors.As(err, &held):
		switch {
		case r.Header.Get(hdrForwarded) != "":
			// The forwarder thought we hold it; we think someone else
			// does. Forwarding on could loop: let the caller retry.
			unavailable(w, fmt.Sprintf("forwarded here, but held by node %s at %s", held.Node, held.Address))
		case held.Address == h.node.Address():
			// A previous process at this address holds it, until its
			// lease runs out and this node fences it.
			unavailable(w, fmt.Sprintf("held by node %s, a previous process at this address, until its lease runs out", held.Node))
		default:
			h.fwd.forward(w, r, held.Address)
		}
	case errors.Is(err, fence.ErrHolderUnseen):
		// The holder's lease is gone but it may still be acknowledging
		// until its next renewal: nowhere to forward, not ours yet.
		unavailable(w, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		unavailable(w, err.Error())
	case errors.Is(err, errStopping):
		unavailable(w, err.Error())
	default:
		// The bucket is unreachable, a restore failed, the node lost
		// its lease: nothing the caller did, and it may pass.
		h.log.Warn("cannot open actor", logNamespace, key.ns, logActor, key.id, logErr, err)
		unavailable(w, err.Error())
	}
}

// parseActorKey checks the namespace and actor ID of the URL.
func parseActorKey(r *http.Request) (actorKey, error) {
	k := actorKey{ns: r.PathValue("ns"), id: r.PathValue("id")}
	if !namespacePattern.MatchString(k.ns) {
		return k, fmt.Errorf("namespace %q: 1 to 64 of A-Z a-z 0-9 _ -", k.ns)
	}
	if len(k.id) == 0 || len(k.id) > frames.MaxActorIDBytes {
		return k, fmt.Errorf("actor ID: 1 to %d bytes", frames.MaxActorIDBytes)
	}
	return k, nil
}

// status answers GET /status: this node and the actors it holds.
func (h *host) status(w http.ResponseWriter, r *http.Request) {
	live := "live"
	if err := h.node.Valid(); err != nil {
		live = err.Error()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"node":    h.node.ID(),
		"address": h.node.Address(),
		"state":   live,
		"actors":  h.actorStatuses(),
	})
}

// unavailable answers 503 with Retry-After: 1, the answer to retry.
func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, msg)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) // the client hung up, or nothing to do
}
