package fuzz

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// history is the clean bucket FuzzRestore damages: one actor written
// through the real write path (package fence claims and releases it, the
// VFS captures and uploads every commit, package compact writes a
// snapshot mid-session), and the database as it was at every durable
// frame, the oracle a restore must reproduce.
//
// It is small on purpose, since every execution restores and verifies
// it: 512-byte pages, two sessions, nine objects of a few hundred bytes.
//
//	session 1  snapshot (frame 0), 1 batch
//	session 2  snapshot (session 1's end), 2 batches, snapshot (compaction,
//	           covered batches kept by retention), 2 batches
//	own.json   released by session 2 (epoch 2)
type history struct {
	actor frames.Actor
	keys  []string          // every object of the actor, sorted
	data  map[string][]byte // their bytes
	// states is the digest of the database at every durable sequence
	// number, and latest the newest. Every commit was made durable before
	// the next, so each batch holds one frame and every frame boundary a
	// restore can stop at is a state recorded here.
	states map[frames.Seq][sha256.Size]byte
	latest frames.Seq
	// sessionStart is the sequence number session 2 starts from: a seq
	// target before it has no snapshot in the current session.
	sessionStart frames.Seq
}

const (
	historyNamespace = "fuzz"
	historyPageSize  = 512
)

var historyActorID = []byte("restore")

// newHistory writes the clean bucket into a directory under dir.
func newHistory(tb testing.TB, dir string) *history {
	tb.Helper()
	ctx := context.Background()
	root := filepath.Join(dir, "bucket")
	if err := os.Mkdir(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	b, err := bucket.NewDir(root)
	if err != nil {
		tb.Fatal(err)
	}
	h := &history{
		actor:  frames.Actor{Namespace: frames.NamespaceID("", historyNamespace), Actor: frames.ActorKey(historyActorID)},
		data:   map[string][]byte{},
		states: map[frames.Seq][sha256.Size]byte{},
	}
	node, err := fence.Register(ctx, b, "127.0.0.1:1", fence.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	local := filepath.Join(dir, "local")
	// Retention keeps what the compaction pass covers (and session 1), so
	// that the bucket holds both snapshots of session 2 and the batches
	// between them.
	const retention = 24 * time.Hour
	session := func(stmts ...string) {
		db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: historyNamespace, Actor: historyActorID, Node: node,
			Dir: local, PageSize: historyPageSize, DisableCompaction: true, UploadInterval: -1})
		if err != nil {
			tb.Fatal(err)
		}
		c, err := db.Conn()
		if err != nil {
			tb.Fatal(err)
		}
		record := func() {
			if err := db.Durable(ctx); err != nil {
				tb.Fatal(err)
			}
			if _, _, err := c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE); err != nil {
				tb.Fatal(err)
			}
			st := db.Stats()
			if st.Durable != st.Captured {
				tb.Fatalf("durable %d, captured %d", st.Durable, st.Captured)
			}
			data, err := os.ReadFile(db.Path())
			if err != nil {
				tb.Fatal(err)
			}
			// Every state passes integrity_check, so a restore that
			// returns one returns a sound database.
			copied := filepath.Join(dir, fmt.Sprintf("state-%d.db", st.Durable))
			if err := os.WriteFile(copied, data, 0o644); err != nil {
				tb.Fatal(err)
			}
			if err := restore.IntegrityCheck(ctx, copied); err != nil {
				tb.Fatalf("the state at frame %d: %v", st.Durable, err)
			}
			h.states[st.Durable] = sha256.Sum256(data)
			h.latest = st.Durable
		}
		record() // the session's first snapshot
		if db.Epoch() == 2 {
			h.sessionStart = h.latest
		}
		for _, s := range stmts {
			if s == "compact" {
				// Live: the session is open, and its writer does not
				// compact it (DisableCompaction), so no owner collects
				// what this snapshot names.
				if _, err := compact.Actor(ctx, b, h.actor, compact.Options{Force: true, Retention: retention,
					ScratchDir: dir, Live: true}); err != nil {
					tb.Fatal(err)
				}
				continue
			}
			if err := c.Exec(s); err != nil {
				tb.Fatalf("%s: %v", s, err)
			}
			record()
		}
		c.Close()
		if err := db.Close(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	session("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	session(
		"INSERT INTO t(v) SELECT hex(randomblob(200)) FROM generate_series(1, 3)", // onto new pages
		"CREATE INDEX tv ON t(v)",
		"compact",
		"DELETE FROM t WHERE id = 2",
		"UPDATE t SET v = 'one' WHERE id = 1",
	)
	if err := node.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	for info, err := range bucket.All(ctx, b, h.actor.Prefix()) {
		if err != nil {
			tb.Fatal(err)
		}
		data, _, err := bucket.ReadAll(ctx, b, info.Key, 1<<20)
		if err != nil {
			tb.Fatal(err)
		}
		h.keys = append(h.keys, info.Key)
		h.data[info.Key] = data
	}
	slices.Sort(h.keys)
	h.check(tb, b, dir)
	return h
}

// check makes sure the oracle describes the bucket: the bucket holds what
// the comment on history says, restoring it to the latest state and to
// every frame of session 2 gives the recorded states, and verification
// finds no damage. Without this a wrong oracle would make the fuzzer
// report restore bugs that are not there, or miss ones that are.
func (h *history) check(tb testing.TB, b bucket.Bucket, dir string) {
	tb.Helper()
	ctx := context.Background()
	inv, err := restore.Take(ctx, b, h.actor)
	if err != nil {
		tb.Fatal(err)
	}
	var shape []string
	for _, s := range inv.Sessions {
		shape = append(shape, fmt.Sprintf("session %d: %d snapshots, %d batches", s.Epoch, len(s.Snapshots), len(s.Batches)))
	}
	want := []string{"session 2: 2 snapshots, 4 batches", "session 1: 1 snapshots, 1 batches"}
	if !slices.Equal(shape, want) || inv.Own == nil {
		tb.Fatalf("the clean bucket holds %q (own.json %v), want %q and own.json", shape, inv.Own != nil, want)
	}
	for n := h.sessionStart; n <= h.latest+1; n++ {
		target := restore.ToSeq(n)
		if n == h.latest+1 {
			target = restore.Latest()
		}
		dest := filepath.Join(dir, fmt.Sprintf("check-%d.db", n))
		res, err := restore.Restore(ctx, b, h.actor, dest, restore.Options{Target: target})
		if err != nil {
			tb.Fatalf("restoring the clean bucket to %s: %v", target, err)
		}
		data, err := os.ReadFile(dest)
		if err != nil {
			tb.Fatal(err)
		}
		wantSeq := min(n, h.latest)
		if res.Seq != wantSeq || h.states[wantSeq] != sha256.Sum256(data) {
			tb.Fatalf("restoring the clean bucket to %s reached seq %d, want %d with the state recorded then", target, res.Seq, wantSeq)
		}
		os.Remove(dest)
	}
	rep, err := restore.Verify(ctx, b, h.actor, restore.VerifyOptions{ScratchDir: dir})
	if err != nil || rep.Damaged() || rep.Seq != h.latest {
		tb.Fatalf("verifying the clean bucket: frame %d, %v, %v", rep.Seq, rep.Problems, err)
	}
	if !bytes.Contains(h.data[h.actor.OwnKey()], []byte(`"node":""`)) {
		tb.Fatalf("own.json %s is not released", h.data[h.actor.OwnKey()])
	}
}
