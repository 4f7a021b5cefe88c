package restore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/require"
)

// Take and Actors fail like the rest of the package: a *restore.Error
// naming the actor (or namespace) listed, wrapping the bucket's error.
func TestListingFailsWithError(t *testing.T) {
	a := frames.Actor{Namespace: "AAAAAAAAAAAAAAAAAAAAAA", Actor: "01"}
	b := buckettest.NewFaulty(buckettest.Dir(t), buckettest.FaultConfig{ErrorRateByOp: map[string]float64{"list": 1}})
	check := func(name string, err error, prefix string, cause error) {
		t.Helper()
		var re *restore.Error
		if !errors.As(err, &re) || re.Op != "list" || re.Actor != prefix {
			t.Fatalf("%s: got %v (%T), want a *restore.Error listing %s", name, err, err, prefix)
		}
		if cause != nil && !errors.Is(err, cause) {
			t.Fatalf("%s: got %v, want it to match %v", name, err, cause)
		}
	}
	_, err := restore.Take(t.Context(), b, a)
	check("Take", err, a.Prefix(), buckettest.ErrInjected)
	_, err = restore.Actors(t.Context(), b, a.Namespace)
	check("Actors", err, "do/"+a.Namespace+"/", buckettest.ErrInjected)
	bad := frames.Actor{Namespace: a.Namespace, Actor: "not hex"}
	_, err = restore.Take(t.Context(), b, bad)
	check("Take of an invalid actor", err, bad.Prefix(), nil)
}

// A *restore.Error prints the object it concerns once, whether its cause
// prints it already (the errors of bucket, frames, lanes, chunks and fence,
// however deep: frames.PrintsKey) or not.
func TestErrorNamesItsKeyOnce(t *testing.T) {
	a := frames.Actor{Namespace: "AAAAAAAAAAAAAAAAAAAAAA", Actor: "01"}
	batch := a.LogKey(1, 9)
	_, badRecord := fence.ParseRecord(a.OwnKey(), []byte(`{"epoch":0}`))
	require.ErrorIs(t, badRecord, fence.ErrBadRecord, "ParseRecord")
	lease := frames.NodeKey("node-1")
	_, badLease := fence.ParseLease(lease, []byte(`{}`))
	require.ErrorIs(t, badLease, fence.ErrBadLease, "ParseLease")
	chunk := a.ChunkKey(frames.ChunkHash{1})
	for name, c := range map[string]struct {
		key string
		err error
	}{
		"bucket":        {batch, &bucket.Error{Op: "get", Key: batch, Err: bucket.ErrNotFound}},
		"frames":        {batch, &frames.Error{Object: "batch", Key: batch, Err: frames.ErrCorrupt}},
		"fence":         {a.OwnKey(), badRecord},
		"tail":          {a.OwnKey(), &restore.TailError{Key: a.OwnKey(), Epoch: 1, ReachedSeq: 3, EndSeq: 9}},
		"lease":         {lease, badLease},
		"lanes":         {batch, &lanes.Error{Op: "apply", Key: batch, Err: &bucket.Error{Op: "get", Key: batch, Err: bucket.ErrNotFound}}},
		"chunks":        {chunk, &chunks.Error{Op: "load", Manifest: a.SnapshotKey(1, 3), Chunk: chunk, Err: chunks.ErrMissing}},
		"another key":   {batch, &frames.Error{Object: "batch", Key: a.LogKey(1, 3), Err: frames.ErrCorrupt}},
		"plain message": {batch, errors.New("boom")},
	} {
		msg := (&restore.Error{Op: "replay", Actor: a.Prefix(), Epoch: 1, Key: c.key, Err: c.err}).Error()
		if n := strings.Count(msg, c.key); n != 1 {
			t.Errorf("%s: %q names %s %d times, want once", name, msg, c.key, n)
		}
	}
}
