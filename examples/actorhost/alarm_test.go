package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
)

// The alarm routes and the trivial handler: an alarm set through a node
// that does not hold the actor is set on its holder (forwarded), read
// back, and runs there once due: a note says so, and the alarm is gone. A
// deleted alarm never runs; a namespace without alarms on this node and a
// body that is no time are refused.
func TestAlarmRoutes(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	h := startInProcess(t, b, "", "-alarm-namespaces", "al,other")
	peer := startInProcess(t, b, "", "-alarm-namespaces", "al,other")
	require.Equal(t, http.StatusOK, do(ctx, http.MethodPost, h.url("al", "x", "notes"), "first").status)

	r := do(ctx, http.MethodPut, peer.url("al", "x", "alarm"), "300ms")
	require.Equal(t, http.StatusOK, r.status, "%v", r)
	assert.Equal(t, h.id, r.node, "set on the holder")
	var set alarmJSON
	require.NoError(t, json.Unmarshal(r.body, &set))
	assert.Equal(t, uint64(1), set.Generation)
	r = do(ctx, http.MethodGet, h.url("al", "x", "alarm"), "")
	require.Equal(t, http.StatusOK, r.status, "%v", r)
	var got alarmJSON
	require.NoError(t, json.Unmarshal(r.body, &got))
	assert.True(t, set.Due.Equal(got.Due), "read back %v, set %v", got.Due, set.Due)

	if !waitFor(ctx, hangGuard, func() bool {
		return do(ctx, http.MethodGet, h.url("al", "x", "alarm"), "").status == http.StatusNotFound
	}) {
		t.Fatal("the alarm never ran")
	}
	r = do(ctx, http.MethodGet, h.url("al", "x", "notes"), "")
	require.Equal(t, http.StatusOK, r.status, "%v", r)
	var notes []note
	require.NoError(t, json.Unmarshal(r.body, &notes))
	require.Len(t, notes, 2, "%v", notes)
	assert.Equal(t, "first", notes[0].Body)
	assert.True(t, strings.HasPrefix(notes[1].Body, "alarm "+set.Due.Format(time.RFC3339Nano)+" (generation 1, retry 0)"), "the alarm's note: %q", notes[1].Body)

	soon := time.Now().Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	require.Equal(t, http.StatusOK, do(ctx, http.MethodPut, h.url("al", "x", "alarm"), soon).status)
	require.Equal(t, http.StatusOK, do(ctx, http.MethodDelete, h.url("al", "x", "alarm"), "").status)
	assert.Equal(t, http.StatusNotFound, do(ctx, http.MethodGet, h.url("al", "x", "alarm"), "").status)
	time.Sleep(time.Second) // past its time
	r = do(ctx, http.MethodGet, h.url("al", "x", "notes"), "")
	require.NoError(t, json.Unmarshal(r.body, &notes))
	assert.Len(t, notes, 2, "a deleted alarm ran: %v", notes)

	r = do(ctx, http.MethodPut, h.url("noalarms", "x", "alarm"), "1m")
	assert.Equal(t, http.StatusBadRequest, r.status, "%v", r)
	r = do(ctx, http.MethodPut, h.url("al", "x", "alarm"), "tomorrow")
	assert.Equal(t, http.StatusBadRequest, r.status, "%v", r)
}
