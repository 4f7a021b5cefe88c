package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func put(t *testing.T, b bucket.Bucket, key, body string) {
	t.Helper()
	_, err := b.Put(t.Context(), key, strings.NewReader(body), int64(len(body)), bucket.Condition{})
	require.NoError(t, err)
}

func TestInspectBatch(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 4)
	key := f.batches(t)[1] // seq 2: the first insert
	r := runCLI(t, "inspect", "--bucket", f.url, key).want(t, exitOK)
	contains(t, "inspect", r.stdout, "batch "+key, "header: epoch 1, seq 2..2, 1 frame messages",
		"frame 2..2  epoch 1  lane 0  sqlitePages", "page size 4096", "committed ", "verified")
	if strings.Contains(r.stdout, "page 1:") {
		t.Errorf("page bytes printed without --pages:\n%s", r.stdout)
	}

	// JSON, flags after the key; --pages adds the bytes.
	r = runCLI(t, "inspect", "--bucket", f.url, key, "--json", "--pages").want(t, exitOK)
	rep := jsonOf[inspectReport](t, r)
	if !rep.Verified || rep.Kind != kindBatch || rep.Batch == nil || len(rep.Batch.Frames) != 1 {
		t.Fatalf("inspect --json: %+v", rep)
	}
	fr := rep.Batch.Frames[0]
	if fr.FirstSeq != 2 || fr.LastSeq != 2 || fr.PageCount == 0 || len(fr.Pages) != fr.PageCount ||
		len(fr.Pages[0].Data) != 2*4096 || fr.ChecksumBefore == fr.ChecksumAfter || fr.CommitTime == nil {
		t.Errorf("frame %+v", fr)
	}
	// The chain: frame 2's checksum before is frame 1's after.
	r = runCLI(t, "inspect", "--bucket", f.url, f.batches(t)[0], "--json").want(t, exitOK)
	var first inspectReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &first))
	if got := first.Batch.Frames[0]; got.ChecksumAfter != fr.ChecksumBefore || got.Pages != nil {
		t.Errorf("frame 1: checksum after %s, frame 2 before %s; pages without --pages: %d", got.ChecksumAfter, fr.ChecksumBefore, len(got.Pages))
	}
}

// A full snapshot, as framectl wrote them before manifests.
func TestInspectSnapshot(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	key := f.snapshot(t)
	toFullSnapshot(t, f.b, f.actor, key)
	r := runCLI(t, "inspect", "--bucket", f.url, key).want(t, exitOK)
	contains(t, "inspect", r.stdout, "snapshot "+key, "header: epoch 1, through seq 0", "LANE", "verified")

	r = runCLI(t, "inspect", "--bucket", f.url, key, "--json", "--pages").want(t, exitOK)
	var rep inspectReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	if rep.Snapshot == nil || len(rep.Snapshot.Lanes) != 1 {
		t.Fatalf("snapshot: %+v", rep.Snapshot)
	}
	if l := rep.Snapshot.Lanes[0]; uint64(len(l.Data)) != l.Pages || l.Bytes != l.Pages*uint64(l.PageSize) {
		t.Errorf("lane %+v with %d pages of data", l, len(l.Data))
	}
}

// A local file: the object key is found in its path, or its kind in its
// content.
func TestInspectFile(t *testing.T) {
	b := buckettest.Dir(t)
	f := replicate(t, b, 3)
	root := b.(*bucket.Dir).Root()
	batch := f.batches(t)[0]

	r := runCLI(t, "inspect", filepath.Join(root, batch)).want(t, exitOK)
	contains(t, "inspect FILE", r.stdout, "batch "+batch, "frame 1..1")

	// Copied out of the bucket: no key, the content says.
	chunk := buckettest.Keys(t, b, f.actor.ChunkPrefix())[0]
	for key, kind := range map[string]string{batch: "batch", f.snapshot(t): "snapshot", chunk: "chunk"} {
		data, err := os.ReadFile(filepath.Join(root, key))
		require.NoError(t, err)
		copied := filepath.Join(t.TempDir(), "object")
		require.NoError(t, os.WriteFile(copied, data, 0o644))
		r = runCLI(t, "inspect", copied).want(t, exitOK)
		contains(t, "inspect "+kind, r.stdout, kind+" "+copied, "verified")
	}
	runCLI(t, "inspect", filepath.Join(t.TempDir(), "missing")).want(t, exitIO)
}

func TestInspectOwnAndLease(t *testing.T) {
	b := buckettest.Dir(t)
	own := testActor.OwnKey()
	put(t, b, own, string(fence.Record{Epoch: 3, Node: "node-1", Address: "10.0.0.5:8080"}.Marshal()))
	put(t, b, frames.NodeKey("node-1"), string(fence.Lease{Node: "node-1", Address: "10.0.0.5:8080", Heartbeat: 42}.Marshal()))

	r := runCLI(t, "inspect", "--bucket", b.String(), own).want(t, exitOK)
	contains(t, "inspect own.json", r.stdout, "epoch 3, held by node node-1 at 10.0.0.5:8080")
	r = runCLI(t, "inspect", "--bucket", b.String(), own, "--json").want(t, exitOK)
	var rep inspectReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	if rep.Own == nil || !rep.Own.Equal(fence.Record{Epoch: 3, Node: "node-1", Address: "10.0.0.5:8080"}) {
		t.Errorf("own: %+v", rep.Own)
	}
	r = runCLI(t, "inspect", "--bucket", b.String(), frames.NodeKey("node-1")).want(t, exitOK)
	contains(t, "inspect lease", r.stdout, "node node-1 at 10.0.0.5:8080, heartbeat 42")
	put(t, b, frames.NodeKey("node-1"), string(fence.Lease{Node: "node-2", Address: "10.0.0.5:8080"}.Marshal()))
	r = runCLI(t, "inspect", "--bucket", b.String(), frames.NodeKey("node-1")).want(t, exitDamage)
	contains(t, "stderr", r.stderr, frames.NodeKey("node-1"))

	// A damaged record: exit 1, naming the key.
	put(t, b, own, `{"epoch":"3","node":"","address":""}`)
	r = runCLI(t, "inspect", "--bucket", b.String(), own).want(t, exitDamage)
	contains(t, "stderr", r.stderr, own, "DAMAGED")

	// A record or a lease larger than any is damage too (bucket.ErrTooLarge
	// alone is not: inspect says so where it knows the limit).
	for _, key := range []string{own, frames.NodeKey("node-1")} {
		put(t, b, key, strings.Repeat(" ", fence.MaxRecordBytes+1))
		r = runCLI(t, "inspect", "--bucket", b.String(), key).want(t, exitDamage)
		contains(t, "stderr", r.stderr, key, "DAMAGED", "too large")
	}
}

func TestInspectDamaged(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	key := f.batches(t)[1]
	damage(t, f.b, key, -6) // inside the gzip trailer's CRC
	r := runCLI(t, "inspect", "--bucket", f.url, key).want(t, exitDamage)
	contains(t, "stderr", r.stderr, key, "DAMAGED")
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "want one line on stderr:\n%s", r.stderr)
	r = runCLI(t, "inspect", "--bucket", f.url, key, "--json").want(t, exitDamage)
	var rep inspectReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	if rep.Verified || rep.Error == nil || rep.Error.Code != exitDamage || rep.Error.Kind != "damage" || !strings.Contains(rep.Error.Message, key) {
		t.Errorf("damaged batch reported %+v", rep)
	}
}

func TestInspectUsage(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 2)
	missing := testActor.LogKey(1, 99)
	r := runCLI(t, "inspect", "--bucket", f.url, missing).want(t, exitNotFound)
	contains(t, "stderr", r.stderr, missing)

	for _, args := range [][]string{
		{"inspect"},
		{"inspect", "--bucket", f.url},
		{"inspect", "--bucket", f.url, "do/not/a/key"},
		{"inspect", "a", "b"},
		{"inspect", "--kind", "table", "a"},
	} {
		r := runCLI(t, args...).want(t, exitUsage)
		contains(t, strings.Join(args, " "), r.stderr, "try: framectl inspect")
	}
}

func TestInspectUnreachable(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "inspect", "--bucket", unreachable, testActor.LogKey(1, 1)).want(t, exitIO)
	contains(t, "stderr", r.stderr, "framectl inspect: ", "127.0.0.1:1")
}
