package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifyClean(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 6)
			for _, args := range [][]string{
				{"verify", "--bucket", f.url},
				{"verify", "--bucket", f.url, "--namespace", testNamespace},
				append([]string{"verify"}, f.actorFlags()...),
			} {
				r := runCLI(t, args...).want(t, exitOK)
				contains(t, strings.Join(args, " "), r.stdout, f.actor.Actor, "ok: session 1 verified through seq 6", ": clean")
			}
			r := runCLI(t, "verify", "--bucket", f.url, "--json").want(t, exitOK)
			rep := jsonOf[verifyReport](t, r)
			if !rep.Clean || rep.Damage != 0 || len(rep.Actors) != 1 || rep.Actors[0].Seq != 6 {
				t.Errorf("verify --json: %+v", rep)
			}
			assert.Equal(t, 0, rep.Warnings, "want no problem")
			assert.Len(t, rep.Actors[0].Problems, 0, "want no problem")
		})
	}
}

func TestVerifyDamaged(t *testing.T) {
	t.Run("flipped", func(t *testing.T) {
		f := replicate(t, buckettest.Dir(t), 6)
		key := f.batches(t)[3]
		damage(t, f.b, key, -6)
		r := runCLI(t, "verify", "--bucket", f.url).want(t, exitDamage)
		contains(t, "verify", r.stdout, "DAMAGE", key, "DAMAGED")
		contains(t, "stderr", r.stderr, "damage found")
		assert.Equal(t, 1, strings.Count(r.stderr, "framectl verify:"), "want one error line on stderr:\n%s", r.stderr)
		rep := jsonOf[verifyReport](t, runCLI(t, append([]string{"verify", "--json"}, f.actorFlags()...)...).want(t, exitDamage))
		found := false
		for _, p := range rep.Actors[0].Problems {
			found = found || p.Key == key && p.Severity == "damage"
		}
		if rep.Clean || !found {
			t.Errorf("verify --json does not name %s as damaged: %+v", key, rep)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f := replicate(t, buckettest.Dir(t), 6)
		batches := f.batches(t)
		if err := f.b.Delete(t.Context(), batches[2]); err != nil { // frame 3
			t.Fatal(err)
		}
		rep := jsonOf[verifyReport](t, runCLI(t, "verify", "--bucket", f.url, "--namespace", testNamespace, "--json").want(t, exitDamage))
		var gap *verifyProblem
		for i, p := range rep.Actors[0].Problems {
			if p.Kind == "gap" && p.Severity == "damage" {
				gap = &rep.Actors[0].Problems[i]
			}
		}
		if gap == nil || gap.From != 3 || gap.To != 3 || gap.Key != batches[3] {
			t.Fatalf("want a gap of frame 3 before %s, got %+v", batches[3], rep.Actors[0].Problems)
		}
		r := runCLI(t, "verify", "--bucket", f.url).want(t, exitDamage)
		contains(t, "verify", r.stdout, "gap", batches[3])
	})
}

func TestVerifyNotFound(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 2)
	runCLI(t, "verify", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef").want(t, exitNotFound)
	runCLI(t, "verify", "--bucket", f.url, "--namespace", "nothing-here").want(t, exitNotFound)
	// An empty bucket holds no damage.
	runCLI(t, "verify", "--bucket", buckettest.Dir(t).String()).want(t, exitOK)
}

func TestVerifyUsage(t *testing.T) {
	url := buckettest.Dir(t).String()
	for _, args := range [][]string{
		{"verify"},
		{"verify", "--bucket", url, "--actor", "00"},
		{"verify", "--bucket", url, "--tenant", "acme"},
		{"verify", "--bucket", url, "--parallel", "-1"},
		{"verify", "--bucket", url, "--json=maybe"},
	} {
		r := runCLI(t, args...).want(t, exitUsage)
		contains(t, strings.Join(args, " "), r.stderr, "try: framectl verify")
	}
}

func TestVerifyUnreachable(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "verify", "--bucket", unreachable).want(t, exitIO)
	contains(t, "stderr", r.stderr, "framectl verify: ")
}

// States a healthy cluster leaves behind are warnings: printed, in the
// JSON, and exit 0. An own.json released at an epoch with no objects (an
// open that failed before its first snapshot) and one held by a node
// whose lease is gone (swept).
func TestVerifyWarnings(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 3)
	own := f.actor.OwnKey()
	for _, tc := range []struct {
		record fence.Record
		want   string
	}{
		{fence.Record{Epoch: 5}, "released at epoch 5, which has no objects"},
		{fence.Record{Epoch: 1, Node: "node-x", Address: "10.0.0.9:80"}, `held by node "node-x", whose lease nodes/node-x.json is gone`},
	} {
		body := tc.record.Marshal()
		_, err := f.b.Put(t.Context(), own, bytes.NewReader(body), int64(len(body)), bucket.Condition{})
		require.NoError(t, err)
		r := runCLI(t, append([]string{"verify"}, f.actorFlags()...)...).want(t, exitOK)
		contains(t, "verify", r.stdout, "warning", own, tc.want, ": clean, 1 warnings")
		rep := jsonOf[verifyReport](t, runCLI(t, append([]string{"verify", "--json"}, f.actorFlags()...)...).want(t, exitOK))
		if !rep.Clean || rep.Warnings != 1 || len(rep.Actors[0].Problems) != 1 ||
			rep.Actors[0].Problems[0].Severity != "warning" || !strings.Contains(rep.Actors[0].Problems[0].Message, tc.want) {
			t.Errorf("verify --json: %+v", rep)
		}
	}
}

// The newest batch of a closed session deleted: the release recorded where
// the session ended, so verify reports the missing frame and restore
// refuses rather than return an older database.
func TestTailLoss(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 6)
			batches := f.batches(t)
			if err := f.b.Delete(t.Context(), batches[len(batches)-1]); err != nil { // frame 6
				t.Fatal(err)
			}
			rep := jsonOf[verifyReport](t, runCLI(t, append([]string{"verify", "--json"}, f.actorFlags()...)...).want(t, exitDamage))
			var gap *verifyProblem
			for i, p := range rep.Actors[0].Problems {
				if p.Kind == "gap" && p.Severity == "damage" {
					gap = &rep.Actors[0].Problems[i]
				}
			}
			if gap == nil || gap.From != 6 || gap.To != 6 || gap.Key != f.actor.OwnKey() {
				t.Fatalf("want a gap of frame 6 named by %s, got %+v", f.actor.OwnKey(), rep.Actors[0].Problems)
			}
			r := runCLI(t, append([]string{"restore", "--out", filepath.Join(t.TempDir(), "r.db")}, f.actorFlags()...)...).want(t, exitDamage)
			contains(t, "restore", r.stderr, "sequence number 6 is missing", f.actor.OwnKey())
			// A frame the log still reaches restores as before.
			runCLI(t, append([]string{"restore", "--to-seq", "5", "--out", filepath.Join(t.TempDir(), "r5.db")}, f.actorFlags()...)...).want(t, exitOK)
		})
	}
}
