package restore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/require"
)

// damage returns the damage problems of a report.
func damage(rep restore.Report) []restore.Problem {
	var out []restore.Problem
	for _, p := range rep.Problems {
		if p.Severity == restore.Damage {
			out = append(out, p)
		}
	}
	return out
}

func verify(t testing.TB, b bucket.Bucket, a frames.Actor) restore.Report {
	t.Helper()
	rep, err := restore.Verify(t.Context(), b, a, restore.VerifyOptions{ScratchDir: t.TempDir()})
	require.NoError(t, err)
	return rep
}

// TestVerifyOwnCrossChecks: own.json that parses but disagrees with the
// bucket is damage, named. The states a healthy cluster leaves behind are
// warnings naming own.json: no own.json, a release after an open that
// failed before its first snapshot (an epoch with no objects), and a
// holder whose lease is gone (swept, or deregistered without releasing).
func TestVerifyOwnCrossChecks(t *testing.T) {
	o := newOwned(t, buckettest.Dir(t))
	own := o.w.actor.OwnKey()
	orig := o.objects[own]
	cases := []struct {
		name    string
		record  []byte // nil: delete own.json
		noLease bool
		damage  string   // in the message; "" for no damage
		warn    []string // each in the message of a warning about own.json
		restore error    // Restore's error, nil for success with the latest state
	}{
		{name: "absent", record: nil, warn: []string{"absent"}},
		{name: "lease missing", record: orig, noLease: true, warn: []string{`held by node "node-a", whose lease nodes/node-a.json is gone`}},
		{name: "older epoch", record: fence.Record{Epoch: 1, Node: ownedNode, Address: "h:1"}.Marshal(),
			damage: "session 2 exists", restore: restore.ErrOwnMismatch},
		{name: "epoch without a session", record: fence.Record{Epoch: 9, Node: ownedNode, Address: "10.0.0.5:8080"}.Marshal(),
			damage: "has no objects"},
		{name: "released epoch without a session", record: fence.Record{Epoch: 9}.Marshal(), noLease: true,
			warn: []string{"released at epoch 9, which has no objects: a claim whose open failed before its first snapshot"}},
		{name: "epoch without a session, lease missing", record: fence.Record{Epoch: 9, Node: ownedNode, Address: "10.0.0.5:8080"}.Marshal(),
			noLease: true, warn: []string{"whose lease nodes/node-a.json is gone", "held at epoch 9, which has no objects, by a node whose lease is gone"}},
		{name: "not canonical", record: []byte(`{"epoch": 2, "node": "node-a", "address": "10.0.0.5:8080"}`), damage: "altered", restore: fence.ErrBadRecord},
		{name: "unparsable", record: []byte(`{"epoch":2}`), damage: "unreadable", restore: fence.ErrBadRecord},
		{name: "released", record: fence.Record{Epoch: 2}.Marshal(), noLease: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.record == nil {
				restoreOwn := hide(t, o.b, own)
				defer restoreOwn()
			} else {
				put(t, o.b, own, c.record)
				defer put(t, o.b, own, orig)
			}
			if c.noLease {
				defer hide(t, o.b, frames.NodeKey(ownedNode))()
			}
			rep := verify(t, o.b, o.w.actor)
			d := damage(rep)
			switch {
			case c.damage == "" && len(d) > 0:
				t.Fatalf("damage: %v", d)
			case c.damage != "" && (len(d) != 1 || d[0].Key != own || d[0].Kind != restore.KindOwn || !strings.Contains(d[0].Message, c.damage)):
				t.Fatalf("damage %v, want one own problem saying %q", d, c.damage)
			}
			var warnings []restore.Problem
			for _, p := range rep.Problems {
				if p.Key == own && p.Severity == restore.Warning {
					warnings = append(warnings, p)
				}
			}
			require.Len(t, warnings, len(c.warn), "warnings about %s", own)
			for i, w := range c.warn {
				if warnings[i].Kind != restore.KindOwn || !strings.Contains(warnings[i].Message, w) {
					t.Errorf("warning %v, want one saying %q", warnings[i], w)
				}
			}
			dest := filepath.Join(t.TempDir(), "r.db")
			_, err := restore.Restore(t.Context(), o.b, o.w.actor, dest, restore.Options{})
			if c.restore != nil {
				if !errors.Is(err, c.restore) || !strings.Contains(err.Error(), own) {
					t.Fatalf("restore: got %v, want %v naming %s", err, c.restore, own)
				}
				if errors.Is(err, restore.ErrOwnMismatch) && !errors.Is(err, fence.ErrBadRecord) {
					t.Fatalf("restore: got %v, want ErrOwnMismatch to match fence.ErrBadRecord too", err)
				}
				return
			}
			require.NoError(t, err)
			got, _ := os.ReadFile(dest)
			dbtest.SameBytes(t, "restored", got, o.want)
		})
	}
}

// TestVerifyNewerSessionWithoutSnapshot: a session newer than the current
// one that holds batches but no snapshot is a gap: its frames cannot be
// restored, and Restore refuses to fall back past it.
func TestVerifyNewerSessionWithoutSnapshot(t *testing.T) {
	o := newOwned(t, buckettest.Dir(t))
	last := o.w.points[len(o.w.points)-1].seq
	var buf bytes.Buffer
	hdr, err := frames.WriteBatch(&buf, 3, []frames.Frame{{Epoch: 3, FirstSeq: last + 1, LastSeq: last + 1, Kind: frames.KindInitialize}}, frames.WriteOptions{})
	require.NoError(t, err)
	key := o.w.actor.LogKey(3, hdr.LastSeq)
	put(t, o.b, key, buf.Bytes())
	put(t, o.b, o.w.actor.OwnKey(), fence.Record{Epoch: 3, Node: ownedNode, Address: "10.0.0.5:8080"}.Marshal())
	rep := verify(t, o.b, o.w.actor)
	d := damage(rep)
	if len(d) != 1 || d[0].Key != key || d[0].Kind != restore.KindGap || d[0].Epoch != 3 {
		t.Fatalf("damage %v, want a gap at %s", d, key)
	}
	if rep.Epoch != 2 {
		t.Fatalf("current session %d, want 2", rep.Epoch)
	}
	_, err = restore.Restore(t.Context(), o.b, o.w.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{})
	if !errors.Is(err, restore.ErrNoSnapshot) || !errors.Is(err, lanes.ErrGap) {
		t.Fatalf("restore: got %v, want ErrNoSnapshot and ErrGap", err)
	}
}

// TestVerifyStrayKey: a key under the actor that framectl does not write
// is a stray warning, not damage.
func TestVerifyStrayKey(t *testing.T) {
	o := newOwned(t, buckettest.Dir(t))
	stray := o.w.actor.Prefix() + "notes.txt"
	put(t, o.b, stray, []byte("hello"))
	rep := verify(t, o.b, o.w.actor)
	if d := damage(rep); len(d) > 0 {
		t.Fatalf("damage: %v", d)
	}
	for _, p := range rep.Problems {
		if p.Key == stray && p.Kind == restore.KindStray && p.Severity == restore.Warning {
			return
		}
	}
	t.Fatalf("no stray warning for %s: %v", stray, rep.Problems)
}

// TestVerifyPrefixSkipsAlarmIndex: alarm index entries are neither an
// actor to verify (one names an actor with no objects at all) nor strays.
func TestVerifyPrefixSkipsAlarmIndex(t *testing.T) {
	o := newOwned(t, buckettest.Dir(t))
	other := frames.Actor{Namespace: o.w.actor.Namespace, Actor: frames.ActorKey([]byte("no objects"))}
	keys := []string{o.w.actor.AlarmKey(1_700_000_000_000, 1), other.AlarmKey(1_700_000_000_000, 2)}
	for _, k := range keys {
		put(t, o.b, k, nil)
	}
	reports, err := restore.VerifyPrefix(t.Context(), o.b, "", restore.VerifyOptions{ScratchDir: t.TempDir()})
	require.NoError(t, err)
	for _, rep := range reports {
		require.NotEqual(t, other, rep.Actor, "the actor only an alarm entry names was verified")
		for _, p := range rep.Problems {
			require.NotContains(t, keys, p.Key, "reported: %s", p)
		}
	}
	require.NotEmpty(t, reports)
	require.Equal(t, o.w.actor, reports[0].Actor)
}

// TestVerifySnapshots: a second snapshot of the current session, as
// compaction writes it, is checked against the replayed chain. A sound one
// verifies and Restore starts from it; one whose content disagrees with
// the chain at its frame is checksum damage, and Restore fails on it.
func TestVerifySnapshots(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			o := newOwned(t, be.New(t))
			mid := o.w.points[len(o.w.points)-2]
			key, good := compactTo(t, o.b, o.w.actor, 2, mid.seq)
			put(t, o.b, key, good)
			if d := damage(verify(t, o.b, o.w.actor)); len(d) > 0 {
				t.Fatalf("a sound compacted snapshot: damage %v", d)
			}
			res, got := restoreTo(t, o.b, o.w.actor, restore.Latest())
			dbtest.SameBytes(t, "restored from the compacted snapshot", got, o.want)
			require.Equal(t, key, res.Snapshot, "restored")

			// The state of an earlier point, labelled as the state at mid.
			before := o.w.points[len(o.w.points)-3]
			if before.seq == mid.seq {
				t.Fatal("no commit between the points") // every round of newOwned commits
			}
			tr, err := lanes.TrackFile(t.Context(), bytes.NewReader(before.data), uint32(dbtest.PageSize(before.data)))
			require.NoError(t, err)
			var buf bytes.Buffer
			_, err = lanes.WriteSnapshot(t.Context(), &buf, frames.Snapshot{Epoch: 2, Seq: mid.seq},
				[]lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: tr, File: bytes.NewReader(before.data)}},
				frames.WriteOptions{})
			require.NoError(t, err)
			put(t, o.b, key, buf.Bytes())
			d := damage(verify(t, o.b, o.w.actor))
			if len(d) != 1 || d[0].Key != key || d[0].Kind != restore.KindChecksum {
				t.Fatalf("a snapshot that disagrees with the chain: damage %v, want checksum at %s", d, key)
			}
			_, err = restore.Restore(t.Context(), o.b, o.w.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{})
			require.ErrorIs(t, err, lanes.ErrChecksum, "restore from it")
		})
	}
}

// TestIntegrityCheckFails: a snapshot whose every checksum is right but
// whose database is not sound fails integrity_check: Restore fails with
// ErrIntegrity and leaves nothing, Verify reports integrity damage.
func TestIntegrityCheckFails(t *testing.T) {
	b := buckettest.Dir(t)
	w := newWorkload(t, b, "integrity", 8, 1024)
	p := w.durableOps(6)
	w.closeDB()
	// Scramble the last page, a b-tree page, and store the result as a
	// newer session's snapshot, with checksums computed over the
	// scrambled bytes.
	bad := bytes.Clone(p.data)
	last := bad[len(bad)-1024:]
	for i := range last[8:] {
		last[8+i] ^= byte(i*7 + 1)
	}
	tr, err := lanes.TrackFile(t.Context(), bytes.NewReader(bad), 1024)
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = lanes.WriteSnapshot(t.Context(), &buf, frames.Snapshot{Epoch: 2, Seq: p.seq},
		[]lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: tr, File: bytes.NewReader(bad)}},
		frames.WriteOptions{})
	require.NoError(t, err)
	key := w.actor.SnapshotKey(2, p.seq)
	put(t, b, key, buf.Bytes())
	put(t, b, w.actor.OwnKey(), fence.Record{Epoch: 2}.Marshal()) // as session 2's writer leaves it

	dir := t.TempDir()
	_, err = restore.Restore(t.Context(), b, w.actor, filepath.Join(dir, "r.db"), restore.Options{})
	if !errors.Is(err, restore.ErrIntegrity) || !errors.Is(err, frames.ErrCorrupt) {
		t.Fatalf("got %v, want ErrIntegrity, which is frames.ErrCorrupt", err)
	}
	require.Len(t, dirEntries(t, dir), 0, "left behind")
	d := damage(verify(t, b, w.actor))
	if len(d) != 1 || d[0].Key != key || d[0].Kind != restore.KindIntegrity {
		t.Fatalf("damage %v, want integrity at %s", d, key)
	}
}

// TestVerifyHeaderDisagreesWithKey: a batch whose header decodes but
// disagrees with its key is read again to its end to say which it is: a
// corrupt header (a flipped bit; the seal proves the bytes were altered),
// or a whole object stored under a wrong key. Both are damage named at the
// key, on the replayed path and off it; Restore fails with a
// *frames.KeyMismatchError.
func TestVerifyHeaderDisagreesWithKey(t *testing.T) {
	o := newOwned(t, buckettest.Dir(t))
	// flipped returns a copy of the batch at key with one bit flipped so
	// that its header still decodes but disagrees with the key.
	flipped := func(key string) []byte {
		data := o.objects[key]
		for i := 10; i < len(data); i++ {
			for bit := 0; bit < 8; bit++ {
				d := bytes.Clone(data)
				d[i] ^= 1 << bit
				var mm *frames.KeyMismatchError
				if _, _, err := frames.ReadBatch(bytes.NewReader(d), key, frames.Limits{}); errors.As(err, &mm) {
					return d
				}
			}
		}
		t.Fatalf("no single bit flip of %s decodes to another header", key)
		return nil
	}
	var superseded string
	for k, s := range o.epoch {
		if s == 1 && strings.Contains(k, "/log/") {
			superseded = k
		}
	}
	check := func(t *testing.T, key string, want ...string) {
		t.Helper()
		d := damage(verify(t, o.b, o.w.actor))
		if len(d) != 1 || d[0].Key != key || d[0].Kind != restore.KindCorrupt {
			t.Fatalf("damage %v, want one corrupt object %s", d, key)
		}
		for _, w := range want {
			if !strings.Contains(d[0].Message, w) {
				t.Errorf("message %q does not say %q", d[0].Message, w)
			}
		}
	}
	for _, key := range []string{o.batches[1], superseded} {
		t.Run("flipped "+key, func(t *testing.T) {
			put(t, o.b, key, flipped(key))
			defer put(t, o.b, key, o.objects[key])
			check(t, key, "corrupt header: it says epoch ", ", the key says epoch ", "the rest of the object confirms the damage")
			if o.onPath[key] {
				_, err := restore.Restore(t.Context(), o.b, o.w.actor, filepath.Join(t.TempDir(), "r.db"), restore.Options{})
				var mm *frames.KeyMismatchError
				if !errors.As(err, &mm) || !errors.Is(err, frames.ErrCorrupt) || !strings.Contains(err.Error(), key) {
					t.Fatalf("restore: %v, want a *frames.KeyMismatchError naming %s", err, key)
				}
			}
		})
	}
	t.Run("wrong key", func(t *testing.T) {
		// The newest batch of session 2, whole, also under a later last seq.
		src := o.batches[len(o.batches)-1]
		r := o.ranges[src]
		key := o.w.actor.LogKey(2, r[1]+5)
		put(t, o.b, key, o.objects[src])
		defer o.b.Delete(t.Context(), key)
		check(t, key, "stored under a wrong key: the object reads whole",
			fmt.Sprintf("header says epoch 2, seq %d..%d, the key says epoch 2, last seq %d", r[0], r[1], r[1]+5))
	})
}
