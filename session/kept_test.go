package session

import (
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/stretchr/testify/require"
)

// keptWorkload opens a database on b that compacts after every batch and
// rewrites its rows until done says so (called before each round, with
// the directory of the copies), and returns it open.
func keptWorkload(t *testing.T, b bucket.Bucket, keptBytes int64, configure func(*Config), done func(round int, db *DB, dir string) bool) (*DB, Config) {
	t.Helper()
	cfg := replTestConfig(t, b)
	cfg.DisableCompaction = false
	cfg.Compaction = compact.Rule{MinLogBytes: -1, MinInterval: -1}
	cfg.KeptBytes = keptBytes
	if configure != nil {
		configure(&cfg)
	}
	db := replOpen(t, cfg)
	c := replConn(t, db)
	dbtest.Exec(t, c, rewrittenRows)
	require.NoError(t, db.Durable(t.Context()))
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; !done(i, db, filepath.Join(cfg.Dir, keptDir)); i++ {
		rewriteRows(t, db, c, i)
		if time.Now().After(deadline) {
			t.Fatalf("not done after 60 s; stats %+v", db.Stats())
		}
	}
	require.NoError(t, c.Close())
	return db, cfg
}

// restoresTo closes db and checks that the bucket restores to exactly its
// file, with every pass successful.
func restoresTo(t *testing.T, b bucket.Bucket, db *DB) {
	t.Helper()
	actor, path := db.actor, db.Path()
	require.NoError(t, db.Close(t.Context()))
	st := db.Stats()
	if st.CompactionErrors != 0 {
		t.Fatalf("%d of %d compaction passes failed", st.CompactionErrors, st.Compactions)
	}
	out := filepath.Join(t.TempDir(), "restored.db")
	_, err := restore.Restore(t.Context(), b, actor, out, restore.Options{})
	require.NoError(t, err)
	dbtest.SameBytes(t, "restored vs database", dbtest.FileBytes(t, out), dbtest.FileBytes(t, path))
}

// keptKeys lists the keys of the copies under dir.
func keptKeys(t *testing.T, dir string) []frames.Key {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, keptDir))
	require.NoError(t, err)
	var keys []frames.Key
	for _, e := range ents {
		s, err := url.PathUnescape(e.Name())
		require.NoError(t, err)
		k, err := frames.ParseKey(s)
		require.NoError(t, err, "kept file %s", e.Name())
		keys = append(keys, k)
	}
	return keys
}

// A session's compaction passes read the batches, manifests and chunks it
// uploaded from the copies it keeps, not from the bucket: no GET of any of
// them all session long, where without copies every pass makes several.
// What they write restores to exactly the database, and the copies left
// are what the next pass needs: no batch the newest snapshot covers, one
// manifest. A new session on the directory keeps only the chunks.
func TestCompactionReadsKeptCopies(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			for _, c := range []struct {
				name  string
				kept  int64
				reads bool
			}{{"kept", 0, false}, {"none", -1, true}} {
				t.Run(c.name, func(t *testing.T) {
					cb := &countingBucket{Bucket: be.New(t)}
					// Whether the last pass ended in error: Close cancels
					// a pass in flight, and a manifest whose PUT landed
					// while the pass saw it fail is in the bucket but not
					// among the copies.
					var lastFailed atomic.Bool
					observe := func(cfg *Config) {
						cfg.Observer.Compaction = func(_ time.Duration, err error) { lastFailed.Store(err != nil) }
					}
					db, cfg := keptWorkload(t, cb, c.kept, observe, func(_ int, db *DB, _ string) bool {
						return db.Stats().Compactions > 3 // past the session's first
					})
					gets := cb.objectGets.Load()
					t.Logf("%d passes, %d GETs of batches, snapshots and chunks", db.Stats().Compactions, gets)
					if c.reads != (gets > 0) || c.reads != (db.Stats().KeptReads == 0) {
						t.Fatalf("%d GETs of the actor's objects with KeptBytes %d", gets, c.kept)
					}
					restoresTo(t, cb, db)
					if c.kept < 0 {
						_, err := os.Stat(filepath.Join(cfg.Dir, keptDir))
						require.ErrorIs(t, err, os.ErrNotExist, "KeptBytes < 0 keeps nothing")
						return
					}
					inv, err := restore.Take(t.Context(), cb, db.actor)
					require.NoError(t, err)
					s, _ := inv.Session(cfg.Epoch)
					newest := s.Snapshots[len(s.Snapshots)-1].Seq
					var manifests []frames.Key
					var batches []frames.Key
					for _, k := range keptKeys(t, cfg.Dir) {
						switch k.Kind {
						case frames.KeyLog:
							batches = append(batches, k)
						case frames.KeySnapshot:
							manifests = append(manifests, k)
						}
					}
					if len(manifests) != 1 {
						t.Fatalf("manifests kept %v, want the newest alone", manifests)
					}
					if have := manifests[0].Seq; have != newest && !(have < newest && lastFailed.Load()) {
						t.Errorf("kept manifest %s, the bucket's newest is at %d and the last pass succeeded", manifests[0], newest)
					}
					for _, k := range batches {
						if k.Seq <= manifests[0].Seq {
							t.Errorf("kept batch %s is covered by the kept snapshot %s", k, manifests[0])
						}
					}
					// The next session keeps the chunks of the last one and
					// none of its batches or manifests.
					cfg.Epoch++
					db2 := replOpen(t, cfg)
					chunks := 0
					for _, k := range keptKeys(t, cfg.Dir) {
						if k.Kind == frames.KeyChunk {
							chunks++
						} else if k.Epoch != cfg.Epoch {
							t.Errorf("a new session kept %s of the last one", k)
						}
					}
					if chunks == 0 {
						t.Error("a new session kept no chunk of the last one")
					}
					require.NoError(t, db2.Close(t.Context()))
				})
			}
		})
	}
}

// A damaged copy costs a pass its reads, never a snapshot: with every copy
// flipped in the middle of a session (again each round until a pass has
// read one: a pass in flight may have read them all already), the pass
// that reads them fails its checks, runs again from the bucket, and
// succeeds; the bucket restores to exactly the database.
func TestCompactionDamagedKeptCopies(t *testing.T) {
	b := buckettest.Dir(t)
	var damaged int
	db, _ := keptWorkload(t, b, 0, nil, func(round int, db *DB, dir string) bool {
		if st := db.Stats(); st.KeptFallbacks > 0 {
			return st.Compactions > st.KeptFallbacks+4 // passes after it read copies again
		}
		if round < 2 {
			return false
		}
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			data, err := os.ReadFile(p)
			if err != nil || len(data) == 0 {
				continue // dropped meanwhile
			}
			data[len(data)/2] ^= 0x5a
			require.NoError(t, os.WriteFile(p, data, 0o644))
			damaged++
		}
		return false
	})
	if damaged == 0 {
		t.Fatal("no copy was damaged")
	}
	if st := db.Stats(); st.KeptFallbacks == 0 {
		t.Fatalf("%d copies damaged, yet no pass fell back to the bucket: %+v", damaged, st)
	}
	restoresTo(t, b, db)
}
