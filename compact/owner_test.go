package compact_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
)

// rewriteAll rewrites a row in every few, in every page of bigSession's
// table: every chunk changes.
func rewriteAll(d *testDB, round int) frames.Seq {
	d.exec(fmt.Sprintf("UPDATE t SET b = randomblob(900) WHERE id %% 3 = %d", round%3))
	return d.durable()
}

// listedChunks returns how many chunk objects the actor has.
func listedChunks(t *testing.T, b bucket.Bucket, a frames.Actor) int {
	t.Helper()
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	return len(inv.Chunks)
}

// An owner's passes collect the chunks it put itself as soon as no
// manifest names them, grace or not; the same passes without the Owner
// keep every replaced chunk for the grace. Without the owner's shortcut
// the chunks of a database rewritten at random pile up: one database's
// worth per pass.
func TestOwnerCollectsItsChunksAtOnce(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			const rounds = 5
			for _, owned := range []bool{true, false} {
				d := bigSession(t, b) // session 2: eight chunks and more
				a := d.actor
				perManifest := listedChunks(t, b, a)
				opts := testOptions(t)
				opts.Force = true
				if owned {
					// Not told of the session's first manifest (Wrote): its
					// chunks are not known to be the owner's and keep the
					// grace.
					opts.Owner = compact.NewOwner(2)
				}
				var owned1 int
				for r := range rounds {
					last := rewriteAll(d, r)
					res := mustCompact(t, b, a, opts)
					require.Equal(t, a.SnapshotKey(2, last), res.Snapshot, "round %d", r)
					owned1 += res.ChunksOwned
				}
				n := listedChunks(t, b, a)
				img := d.image()
				got, _ := mustReplay(t, b, a, 2)
				dbtest.SameBytes(t, "replayed vs database", got, img)
				if owned {
					// The newest manifest's chunks, the previous one's (it was
					// listed by the last pass, which deleted it) and the
					// first manifest's (kept by the grace): everything the
					// passes put before is gone.
					require.LessOrEqual(t, n, 3*perManifest, "chunks left after %d owner passes", rounds)
					require.GreaterOrEqual(t, owned1, (rounds-2)*perManifest/2, "chunks the owner collected without the grace")
				} else {
					require.GreaterOrEqual(t, n, rounds*perManifest, "chunks left after %d passes without the owner", rounds)
					require.Zero(t, owned1)
				}
				t.Logf("owner %v: %d chunks listed after %d passes (%d per manifest), %d collected without the grace", owned, n, rounds, perManifest, owned1)
				d.close()
			}
		})
	}
}

// A pass that is not the owner's writes no snapshot of a session that may
// still have a writer (here: one without a node, not closed, so own.json
// records no end), unless Live; once the writer closes, it does.
func TestSnapshotOnlyByOwner(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			d := bigSession(t, b)
			a := d.actor
			last := rewriteAll(d, 0)
			for _, o := range []*compact.Owner{nil, compact.NewOwner(1)} { // none, another session's
				opts := compact.Options{ScratchDir: t.TempDir(), Force: true, Owner: o}
				res := mustCompact(t, b, a, opts)
				require.Empty(t, res.Snapshot, "a pass beside the writer, owner %v", o != nil)
				require.NotEmpty(t, res.SnapshotSkipped)
			}
			opts := compact.Options{ScratchDir: t.TempDir(), Force: true, Live: true}
			res := mustCompact(t, b, a, opts)
			require.Equal(t, a.SnapshotKey(2, last), res.Snapshot, "Live")

			last = rewriteAll(d, 1)
			d.close() // own.json records the end
			opts.Live = false
			res = mustCompact(t, b, a, opts)
			require.Empty(t, res.SnapshotSkipped)
			require.Equal(t, a.SnapshotKey(2, last), res.Snapshot, "after the writer closed")
		})
	}
}

// With a retention window every manifest of the hour stays, and a pass
// must know every chunk they name before it collects any. An owner's
// passes read each manifest once: a pass reads the base to replay it and
// nothing else (package session serves that read from its kept copy), where
// the same passes without the Owner read every retained manifest again.
func TestOwnerReadsEachManifestOnce(t *testing.T) {
	b := buckettest.Dir(t)
	const rounds = 5
	reads := map[bool][]int64{}
	for _, owned := range []bool{true, false} {
		d := bigSession(t, b)
		g := &getCounter{Bucket: b, prefix: d.actor.SnapshotPrefix()}
		opts := testOptions(t)
		opts.Force, opts.Retention = true, time.Hour
		if owned {
			opts.Owner = compact.NewOwner(2)
		}
		for r := range rounds {
			rewriteAll(d, r)
			g.take()
			res := mustCompact(t, g, d.actor, opts)
			require.NotEmpty(t, res.Snapshot)
			require.Zero(t, res.ChunksDeleted, "every manifest is retained, and names its chunks")
			reads[owned] = append(reads[owned], int64(len(g.take())))
		}
		d.close()
	}
	t.Logf("snapshot GETs per pass: owner %v, without %v", reads[true], reads[false])
	for r := 1; r < rounds; r++ {
		// The replay's read of the base; the session's first manifest and
		// the predecessor's, read in the first pass, are held since.
		require.Equal(t, int64(1), reads[true][r], "pass %d of the owner", r)
		require.GreaterOrEqual(t, reads[false][r], int64(r+1), "pass %d without the owner", r)
	}
}
