package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/host"
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
	hdrForwarded = host.HeaderForwarded
	// hdrVia is set on a forwarded request's answer: the node that
	// forwarded it.
	hdrVia = host.HeaderVia
)

// maxNoteBytes bounds a note's body.
const maxNoteBytes = 1 << 20

// namespacePattern: what a namespace may be (it is also logged and shown
// in /status as given).
var namespacePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Routes of an actor, and the operation each runs.
const (
	routeAddNote   = "POST /actor/{ns}/{id}/notes"
	routeListNotes = "GET /actor/{ns}/{id}/notes"
	routeIncrement = "POST /actor/{ns}/{id}/counter"
	routeSetAlarm  = "PUT /actor/{ns}/{id}/alarm"
	routeGetAlarm  = "GET /actor/{ns}/{id}/alarm"
	routeDelAlarm  = "DELETE /actor/{ns}/{id}/alarm"
)

var operations = map[string]operation{
	routeAddNote:   addNote,
	routeListNotes: listNotes,
	routeIncrement: increment,
	routeSetAlarm:  setAlarm,
	routeGetAlarm:  getAlarm,
	routeDelAlarm:  deleteAlarm,
}

func (s *server) routes() http.Handler {
	actors := s.host.Handler(host.HandlerOptions{
		Route:          parseActorKey,
		Serve:          s.serveActor,
		Error:          func(w http.ResponseWriter, _ *http.Request, status int, msg string) { writeError(w, status, msg) },
		RequestTimeout: s.cfg.request,
		MaxBodyBytes:   maxNoteBytes,
	})
	mux := http.NewServeMux()
	for route := range operations {
		mux.Handle(route, actors)
	}
	mux.HandleFunc("GET /status", s.status)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}))
	return mux
}

// operation runs one request against an open actor and returns the value
// to answer with. It does not wait for the bucket: serveActor does, for
// every operation (the output gate).
type operation func(ctx context.Context, r *http.Request, d *actorDB) (any, error)

func addNote(ctx context.Context, r *http.Request, d *actorDB) (any, error) {
	body, err := io.ReadAll(r.Body) // read already, at most maxNoteBytes (host.Handler)
	if err != nil {
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

// serveActor serves one operation on an actor this node holds (host.Handler
// acquired it, or forwarded the request to its holder): run the
// operation, wait until everything the actor committed so far is in the
// bucket, then answer. Reads wait too: a read may show another request's
// write that is not durable yet, and must not be answered before that
// write is. A database that stopped is closed by the host once this
// request releases it, and opened anew by the next one.
func (s *server) serveActor(w http.ResponseWriter, r *http.Request, a *host.Handle) {
	ctx := r.Context()
	d := a.Value().(*actorDB)
	v, err := operations[r.Pattern](ctx, r, d)
	if err != nil {
		var se *statusError
		switch {
		case errors.As(err, &se):
			writeError(w, se.status, se.msg)
		case d.stopped() != nil:
			unavailable(w, "the actor's database stopped: "+d.stopped().Error())
		case ctx.Err() != nil:
			unavailable(w, ctx.Err().Error())
		default:
			s.log.Error("operation failed", logNamespace, a.Namespace(), logActor, string(a.ID()), logErr, err)
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	// The output gate.
	if err := d.db.Durable(ctx); err != nil {
		unavailable(w, "not acknowledged: "+err.Error())
		return
	}
	w.Header().Set(hdrNode, s.host.Node().ID())
	w.Header().Set(hdrEpoch, a.Epoch().String())
	writeJSON(w, http.StatusOK, v)
}

// parseActorKey checks the namespace and actor ID of the URL.
func parseActorKey(r *http.Request) (string, []byte, error) {
	ns, id := r.PathValue("ns"), r.PathValue("id")
	if !namespacePattern.MatchString(ns) {
		return "", nil, fmt.Errorf("namespace %q: 1 to 64 of A-Z a-z 0-9 _ -", ns)
	}
	if len(id) == 0 || len(id) > frames.MaxActorIDBytes {
		return "", nil, fmt.Errorf("actor ID: 1 to %d bytes", frames.MaxActorIDBytes)
	}
	return ns, []byte(id), nil
}

// actorStatus is one line of GET /status.
type actorStatus struct {
	Namespace string       `json:"namespace"`
	ID        string       `json:"id"`
	Epoch     frames.Epoch `json:"epoch"`
	State     string       `json:"state"`
	Requests  int          `json:"requests"`
	IdleFor   float64      `json:"idle_seconds"`
	Durable   frames.Seq   `json:"durable_seq"`
	Captured  frames.Seq   `json:"captured_seq"`
	Stopped   string       `json:"stopped,omitempty"`
}

// status answers GET /status: this node and the actors it holds.
func (s *server) status(w http.ResponseWriter, r *http.Request) {
	node := s.host.Node()
	live := "live"
	if err := node.Valid(); err != nil {
		live = err.Error()
	}
	actors := []actorStatus{}
	for _, a := range s.host.Actors() {
		st := actorStatus{Namespace: a.Namespace, ID: string(a.ID), Epoch: a.Epoch, State: a.State.String(),
			Requests: a.Handles, IdleFor: a.IdleFor.Seconds(), Durable: a.Stats.Durable, Captured: a.Stats.Captured}
		if a.Stats.Stopped != nil {
			st.Stopped = a.Stats.Stopped.Error()
		}
		actors = append(actors, st)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"node":    node.ID(),
		"address": node.Address(),
		"state":   live,
		"actors":  actors,
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
